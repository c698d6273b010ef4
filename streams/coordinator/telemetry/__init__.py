"""The coordinator's Prometheus telemetry: the Processor's hooks (metrics), the collectors that
serve them at scrape time (progress, outage, admission, and streams: streams by state, each
pipeline's windows ready and in flight, partitions owned), and the consumer lag that the engines
read from the cluster (lag: the only one of them that loads a Kafka client)."""
