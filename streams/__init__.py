"""Tidemark: time-window pipelines on Kafka."""

__version__ = "0.1.0"
