"""Reading a changelog partition to its end, for restoring a local store.

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


def watermarks(settings: KafkaSettings, topic: str, partition: int) -> tuple[int, int]:
    """(low, high) offsets of a partition."""
    consumer = Consumer(settings.librdkafka(**{"group.id": f"{topic}-restore"}))
    try:
        return watermarks_of(consumer, topic, partition)
    finally:
        consumer.close()


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


def read_to_end(
    settings: KafkaSettings, topic: str, partition: int, from_offset: int, batch: int = 10_000
) -> Iterator[list[Entry]]:
    """Yield the committed records of `topic[partition]` from `from_offset` on, in batches."""
    consumer = Consumer(
        settings.librdkafka(
            **{
                "group.id": f"{topic}-restore",  # never commits; assign() needs an id anyway
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "fetch.max.bytes": 52_428_800,
                "max.partition.fetch.bytes": 10_485_760,
            }
        )
    )
    try:
        low, high = watermarks_of(consumer, topic, partition)
        if high <= max(low, from_offset):
            return  # nothing past what we have
        consumer.assign([TopicPartition(topic, partition, max(from_offset, low))])
        last_seen = time.monotonic()
        while True:
            out: list[Entry] = []
            at_end = False
            for msg in consumer.consume(batch, 0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_end = True
                        continue
                    raise BrokerUnavailable(f"restoring {topic}[{partition}]: {err.str()}")
                key, offset = msg.key(), msg.offset()
                if key is not None and offset is not None:
                    out.append((offset, key, msg.value()))
            if out:
                last_seen = time.monotonic()
                yield out
            if at_end:
                return
            if time.monotonic() - last_seen > STALL_TIMEOUT_S:
                raise BrokerUnavailable(
                    f"restoring {topic}[{partition}]: no data and no end for {STALL_TIMEOUT_S:g} s"
                )
    finally:
        consumer.close()
