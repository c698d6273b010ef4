"""Reading changelog partitions to their end, for restoring local stores.

Under read_committed the end of a partition is its last stable offset, and a trailing
transaction marker means the high watermark is never reached, so the end is recognised by
librdkafka's PARTITION_EOF event (Quix Streams hung on exactly this: quix-streams #1017).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from streams.errors import BrokerUnavailable
from streams.kafka.admin import TopicIdentity, describe_topic
from streams.kafka.settings import KafkaSettings

log = logging.getLogger("streams.kafka")

# No message and no end-of-partition event for this long means the broker is not answering.
STALL_TIMEOUT_S = 60.0

Entry = tuple[int, bytes, bytes | None]
# What a partition of a topic created a moment ago answers until it has a leader.
_NO_LEADER_YET = (
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
)  # (offset, key, value or None for a tombstone)


def watermarks_of(consumer: Consumer, topic: str, partition: int) -> tuple[int, int]:
    """(low, high) of a partition, asking again while it has no leader (a fresh topic)."""
    deadline = time.monotonic() + STALL_TIMEOUT_S
    while True:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            return int(low), int(high)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            again = err.retriable() or err.code() in _NO_LEADER_YET
            if not again or time.monotonic() > deadline:
                raise BrokerUnavailable(f"offsets of {topic}[{partition}]: {err.str()}") from exc
            time.sleep(0.2)


def has_records(settings: KafkaSettings, topic: str, partitions: int) -> bool:
    """Whether any partition of `topic` holds a record (False for a missing topic)."""
    consumer = Consumer(settings.librdkafka(**{"group.id": f"{topic}-probe"}))
    try:
        for p in range(partitions):
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            except KafkaException:
                return False
            if high > low:
                return True
        return False
    finally:
        consumer.close()


class ChangelogReader:
    """One read_committed consumer that restores several partitions of a changelog at once:
    they are fetched together, and the consumer is made once (a consumer per partition, and
    one more per watermark query, cost about a second each even with nothing to read)."""

    def __init__(self, settings: KafkaSettings, topic: str) -> None:
        self.topic = topic
        self._settings = settings
        self._identity: TopicIdentity | None = None
        self._consumer = Consumer(
            settings.librdkafka(
                **{
                    "group.id": f"{topic}-restore",  # never commits; assign() needs an id anyway
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "enable.partition.eof": True,
                    "fetch.max.bytes": 52_428_800,
                    "max.partition.fetch.bytes": 10_485_760,
                    # What waits fetched in memory: the default is 64 MiB.
                    "queued.max.messages.kbytes": 32_768,
                }
            )
        )

    def __enter__(self) -> ChangelogReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._consumer.close()

    def _described(self) -> TopicIdentity:
        if self._identity is None:  # asked once per reader: a restore's stores share it
            self._identity = describe_topic(self._settings, self.topic)
        return self._identity

    @property
    def history(self) -> str:
        """The topic's id: a store of another id reflects a deleted topic of the same name."""
        return self._described().topic_id

    @property
    def tombstones_kept_ms(self) -> int:
        """The topic's delete.retention.ms: how long a tombstone is kept once written."""
        return int(self._described().config["delete.retention.ms"])

    def watermarks(self, partition: int) -> tuple[int, int]:
        return watermarks_of(self._consumer, self.topic, partition)

    def resume_at(self, partition: int, stored_offset: int) -> int | None:
        """Where a store that holds the partition up to `stored_offset` (-1: nothing) goes on
        reading; None when the topic does not hold that offset (it was truncated or re-created:
        the store must be restored whole). An offset in range proves nothing more: the store's
        history and age are checked too (streams.coordinator.store_history)."""
        start = stored_offset + 1
        low, high = self.watermarks(partition)
        return None if start > high or (start > 0 and low > start) else start

    def read(
        self, starts: dict[int, int], batch: int = 10_000
    ) -> Iterator[tuple[int, list[Entry]]]:
        """Yield (partition, its records in order) for the partitions of `starts` from their
        start offsets on, until each has reached its end."""
        todo = {}
        for partition, start in starts.items():
            low, high = self.watermarks(partition)
            if high > max(low, start):  # else nothing past what we have
                todo[partition] = max(start, low)
        if not todo:
            return
        topic = self.topic
        self._consumer.assign([TopicPartition(topic, p, o) for p, o in todo.items()])
        left = set(todo)
        last_seen = time.monotonic()
        while left:
            out: dict[int, list[Entry]] = {}
            for msg in self._consumer.consume(batch, 0.5):
                at = msg.partition()
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        left.discard(at)
                        continue
                    raise BrokerUnavailable(f"restoring {topic}[{at}]: {err.str()}")
                key, offset = msg.key(), msg.offset()
                if key is not None and offset is not None and at is not None:
                    entries = out.get(at)
                    if entries is None:
                        entries = out[at] = []
                    entries.append((offset, key, msg.value()))
            if out:
                last_seen = time.monotonic()
                yield from out.items()
            elif time.monotonic() - last_seen > STALL_TIMEOUT_S:
                raise BrokerUnavailable(
                    f"restoring {topic}{sorted(left)}: no data and no end for {STALL_TIMEOUT_S:g} s"
                )
