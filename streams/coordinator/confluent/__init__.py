"""The `confluent` engine (the default): the coordinator on confluent-kafka, exactly once with
Kafka transactions (KIP-447), its state in RocksDB stores with changelog topics."""
