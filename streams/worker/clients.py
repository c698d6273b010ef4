"""The worker's two Kafka clients, configured for its guarantees.

- The consumer commits only by hand (``enable.auto.commit=False``), starts a new group at the
  earliest task, and uses cooperative-sticky assignment, so that a worker joining or leaving
  moves only the partitions it must and the others keep their running tasks.
- The producer is idempotent with ``acks=all`` (a retried send neither duplicates nor
  reorders results) and uses ``murmur2_random``, the partitioner of the Java clients and of
  the coordinator's, so that a stream's results land where the coordinator expects them.

librdkafka's own log lines go to the ``streams.worker.kafka`` logger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.cimpl import Message

from streams.handler import Task
from streams.kafka.settings import KafkaSettings
from streams.worker.config import WorkerConfig
from streams.worker.results import result_key

kafka_log = logging.getLogger("streams.worker.kafka")

DeliveryReport = Callable[[KafkaError | None, Message], None]


def task_consumer(
    settings: KafkaSettings,
    config: WorkerConfig,
    *,
    error_cb: Callable[[KafkaError], None],
    on_commit: Callable[[KafkaError | None, list[Any]], None],
) -> Consumer:
    """A consumer in the worker group (not yet subscribed)."""
    group: dict[str, Any] = {
        "group.id": config.group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": config.session_timeout_ms,
        "heartbeat.interval.ms": min(3_000, config.session_timeout_ms // 3),
        "error_cb": error_cb,
        "on_commit": on_commit,
        "logger": kafka_log,
    }
    if config.instance_id:
        group["group.instance.id"] = config.instance_id
    return Consumer(settings.librdkafka(**group))


class ResultProducer:
    """Sends ``results`` values keyed by stream id; delivery reports come from ``poll``."""

    def __init__(
        self, settings: KafkaSettings, topic: str, error_cb: Callable[[KafkaError], None]
    ) -> None:
        self._topic = topic
        self._producer = Producer(
            settings.producer(
                **{
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "error_cb": error_cb,
                    "logger": kafka_log,
                }
            )
        )

    def send(self, task: Task, value: bytes, delivered: DeliveryReport) -> None:
        """Queue ``value`` for ``task``'s stream; ``delivered`` is called from ``poll``."""
        while True:
            try:
                self._producer.produce(self._topic, value, result_key(task), on_delivery=delivered)
                return
            except BufferError:  # the local queue is full: serve delivery reports, try again
                self._producer.poll(0.1)

    def poll(self) -> None:
        """Serve delivery reports and errors that are ready, without waiting."""
        self._producer.poll(0)

    def flush(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for every queued value; return how many are left."""
        return self._producer.flush(timeout_s)
