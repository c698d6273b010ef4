"""The only place that imports confluent-kafka: settings, admin and client factories."""
