"""The `confluent` engine's delivery: the Kafka transaction as the unit of work, and its commit."""
