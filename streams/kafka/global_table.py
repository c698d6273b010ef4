"""A compacted topic read whole, like a Kafka Streams global table: the latest value per key.

A consumer of its own (in no consumer group: partitions are assigned, offsets never committed)
reads every partition from the beginning, `read_committed`, on a thread of its own, and keeps
the latest decoded value of each key (a tombstone removes it). `snapshot()` is safe to call from
any thread. An undecodable record is logged and skipped. `caught_up()` says whether every
partition has been read to its end once since `start` (its last stable offset: an open
transaction's records are not there yet), so that a reader can tell an empty view from one not
read yet.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import Generic, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from streams.errors import InvalidInput
from streams.kafka.settings import KafkaSettings

log = logging.getLogger("streams.kafka")

V = TypeVar("V")
POLL_S = 0.2


class GlobalTable(Generic[V]):
    def __init__(
        self,
        settings: KafkaSettings,
        topic: str,
        decode: Callable[[bytes | None, bytes | None], V | None],
        partitions: int = 1,
    ) -> None:
        self.topic = topic
        self._decode = decode
        self._partitions = partitions
        self._settings = settings
        self._values: dict[bytes, V] = {}
        self._ends: set[int] = set()  # partitions read to their end once
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        consumer = Consumer(
            self._settings.librdkafka(
                **{
                    # assign() needs an id; nothing is ever committed under it
                    "group.id": f"{self.topic}-global-{uuid.uuid4().hex[:8]}",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "auto.offset.reset": "earliest",
                    "enable.partition.eof": True,  # for `caught_up`
                }
            )
        )
        consumer.assign(
            [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self._partitions)]
        )
        self._thread = threading.Thread(
            target=self._run, args=(consumer,), name=f"global-{self.topic}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def caught_up(self) -> bool:
        """Whether every partition has been read to its end once since `start`."""
        return len(self._ends) >= self._partitions

    def snapshot(self) -> dict[bytes, V]:
        with self._lock:
            return dict(self._values)

    def _run(self, consumer: Consumer) -> None:
        try:
            while not self._stop.is_set():
                for msg in consumer.consume(500, POLL_S):
                    error = msg.error()
                    if error is not None:
                        partition = msg.partition()
                        if error.code() == KafkaError._PARTITION_EOF and partition is not None:
                            self._ends.add(partition)
                        elif error.code() != KafkaError._PARTITION_EOF:
                            log.warning("reading %s: %s", self.topic, error.str())
                        continue
                    self._apply(msg.key(), msg.value())
        except Exception:
            log.exception("reading %s stopped", self.topic)
        finally:
            consumer.close()

    def _apply(self, key: bytes | None, raw: bytes | None) -> None:
        if key is None:
            return
        try:
            value = self._decode(key, raw)
        except InvalidInput as exc:
            log.warning("skipped a record of %s: %s", self.topic, exc)
            return
        with self._lock:
            if value is None:
                self._values.pop(key, None)
            else:
                self._values[key] = value
