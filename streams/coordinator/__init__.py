"""The coordinator: the window lifecycle run over Kafka topics by one Processor and two engines
(confluent/, the default, exactly once; faust/, at least once)."""
