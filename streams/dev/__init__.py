"""Development tools, apart from the shipped runtime (which imports nothing of them): a local
Kafka (broker/: `make kafka`, the tests' brokers) and the demo (demo.py: `make run`)."""
