"""A bounded stretch of one partition, read on demand (the status page's window timeline).

Like `topic_io.TopicReader` it assigns by hand, joins no group, commits nothing and reads
committed records only; unlike it, each read names one partition and an offset range, so a
caller pays for the records it asked for and no more. Every Kafka error leaves this module as
BrokerUnavailable.
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, TopicPartition

from streams.kafka.errors import broker_errors
from streams.kafka.settings import KafkaSettings
from streams.kafka.topic_io import HandClients, TopicRecord, record_of, watermarks

_BATCH = 500


class PartitionTail:
    """Reads ranges of offsets of one topic's partitions, one call at a time (not thread-safe)."""

    def __init__(self, settings: KafkaSettings, topic: str, group_prefix: str) -> None:
        self.settings = settings
        self.topic = topic
        self.group_prefix = group_prefix
        self._clients = HandClients(settings, group_prefix)

    @broker_errors("Kafka did not answer")
    def bounds(self, timeout_s: float) -> dict[int, tuple[int, int]]:
        """Each partition's (low, end) offsets now, the end being the last stable offset;
        {} while the topic does not exist."""
        marks = watermarks(self._clients.admin(), [self.topic], timeout_s)
        return {partition: bounds for (_, partition), bounds in marks.items()}

    @broker_errors("Kafka did not answer")
    def read(
        self, partition: int, start: int, end: int, timeout_s: float
    ) -> tuple[list[TopicRecord], int]:
        """The records of [start, end) of `partition` that arrive within `timeout_s`, and the
        offset to go on from (`end` once it was reached; a transaction's commit marker takes an
        offset and is never delivered, so the partition's end counts as reached too)."""
        if start >= end:
            return [], start
        deadline = time.monotonic() + timeout_s
        consumer = self._clients.consumer()
        consumer.assign([TopicPartition(self.topic, partition, start)])
        records: list[TopicRecord] = []
        position = start
        try:
            while position < end and (left := deadline - time.monotonic()) > 0:
                for msg in consumer.consume(_BATCH, min(left, 0.1)):
                    offset = msg.offset()
                    if offset is None or msg.partition() != partition:
                        continue  # a client-wide error: librdkafka retries on its own
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:  # at `offset`: all there is
                            position = max(position, min(offset, end))
                        continue
                    if offset >= end:
                        position = end
                        break
                    records.append(record_of(msg, self.topic, partition, offset))
                    position = offset + 1
        finally:
            consumer.unassign()
        return records, position

    def close(self) -> None:
        self._clients.close()
