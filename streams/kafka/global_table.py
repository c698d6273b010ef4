"""A compacted topic read whole, like a Kafka Streams global table: the latest value per key.

A consumer of its own (in no consumer group: partitions are assigned, offsets never committed)
reads every partition from the beginning, `read_committed`, on a thread of its own, and keeps
the latest decoded value of each key (a tombstone removes it). `snapshot()` is safe to call from
any thread. An undecodable record is logged and skipped. A consumer that stops making progress
while records wait (streams.kafka.progress) is logged at WARNING and renewed where it stopped.

`caught_up()` says whether every partition has been read as far as it stood at `start`, so that
a reader can tell an empty view from one not read yet: a partition is caught up at its
end-of-partition event, or at a record at or past the end offset it had then. Both are needed: a
partition written more often than a fetch waits (the `health` topic, every second per
coordinator) never shows its end, and a quiet one whose last offset is a transaction marker
never delivers a record there.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Generic, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from streams.errors import InvalidInput
from streams.kafka.progress import DEFAULT_STALL_BOUND_MS, KafkaProgress
from streams.kafka.settings import KafkaSettings

log = logging.getLogger("streams.kafka")

V = TypeVar("V")
POLL_S = 0.2
WATERMARKS_TIMEOUT_S = 30.0
WATERMARKS_CALL_S = 5.0
MAX_OFFSET = 2**63 - 1


class GlobalTable(Generic[V]):
    def __init__(
        self,
        settings: KafkaSettings,
        topic: str,
        decode: Callable[[bytes | None, bytes | None], V | None],
        partitions: int = 1,
        stall_bound_ms: int = DEFAULT_STALL_BOUND_MS,
    ) -> None:
        self.topic = topic
        self._decode = decode
        self._partitions = partitions
        self._settings = settings
        self._values: dict[bytes, V] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._positions: dict[int, int] = {}  # partition -> the next offset to read
        self._progress = KafkaProgress(settings, stall_bound_ms)
        self.renewals = 0  # consumers renewed after a stall (streams.kafka.progress)
        self._reading: Consumer | None = None  # the consumer of the moment (tests wedge it)
        self._ends: set[int] = set()  # partitions read as far as they stood at start
        self._targets: dict[int, int] = {}  # partition -> its end offset at start

    def start(self) -> None:
        self._reading = self._consumer()
        self._thread = threading.Thread(
            target=self._run, args=(self._reading,), name=f"global-{self.topic}", daemon=True
        )
        self._thread.start()

    def _consumer(self) -> Consumer:
        """A consumer assigned every partition, where the last one stopped (else the start)."""
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
            [
                TopicPartition(self.topic, p, self._positions.get(p, OFFSET_BEGINNING))
                for p in range(self._partitions)
            ]
        )
        return consumer

    def caught_up(self) -> bool:
        """Whether every partition has been read to its end once since `start`."""
        return len(self._ends) >= self._partitions

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def snapshot(self) -> dict[bytes, V]:
        with self._lock:
            return dict(self._values)

    def _run(self, consumer: Consumer) -> None:
        try:
            self._find_targets(consumer)
            ends, targets = self._ends, self._targets
            while not self._stop.is_set():
                for msg in consumer.consume(500, POLL_S):
                    error, partition = msg.error(), msg.partition()
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF:
                            log.warning("reading %s: %s", self.topic, error.str())
                        elif partition is not None:
                            ends.add(partition)
                        continue
                    self._apply(msg.key(), msg.value())
                    offset = msg.offset()
                    if partition is not None and offset is not None:
                        self._positions[partition] = offset + 1
                        if offset + 1 >= targets.get(partition, MAX_OFFSET):
                            ends.add(partition)
                stall = self._progress.check(consumer)
                if stall is not None:
                    # A table read no further holds stale values for good: say so, and read on
                    # with a new consumer from where this one stopped.
                    log.warning("reading %s stalled, renewing its consumer: %s", self.topic,
                                stall.describe())  # fmt: skip
                    consumer.close()
                    consumer = self._reading = self._consumer()
                    self.renewals += 1
                    self._progress.renewed()
        except Exception:
            log.exception("reading %s stopped", self.topic)
        finally:
            consumer.close()

    def _find_targets(self, consumer: Consumer) -> None:
        """Each partition's end offset now. A topic just created has no leader for a moment
        (NOT_LEADER_FOR_PARTITION): asked again until `WATERMARKS_TIMEOUT_S`, after which that
        partition waits for its end event."""
        deadline = time.monotonic() + WATERMARKS_TIMEOUT_S
        for p in range(self._partitions):
            while not self._stop.is_set():
                try:
                    _, high = consumer.get_watermark_offsets(
                        TopicPartition(self.topic, p), timeout=WATERMARKS_CALL_S, cached=False
                    )
                except KafkaException as exc:
                    if time.monotonic() < deadline:
                        time.sleep(POLL_S)
                        continue
                    log.warning("end offset of %s[%d] not found: %s", self.topic, p, exc)
                    break
                if high <= 0:
                    self._ends.add(p)  # empty
                else:
                    self._targets[p] = high
                break

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
