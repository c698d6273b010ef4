"""The coordinator: a Faust stream processor that runs the window lifecycle on Kafka topics."""
