"""Reading and writing Tidemark's topics for the read model and the CLI (confluent-kafka).

Consumers here assign partitions by hand: they join no group and commit nothing, so any number
of them can read without disturbing the coordinators' and workers' groups. They read committed
records only (the coordinator writes in transactions), up to the last stable offset: a
transaction still open is not waited for. Every Kafka error leaves this module as
BrokerUnavailable.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec  # not re-exported for type checkers

from streams.errors import BrokerUnavailable
from streams.kafka.errors import broker_errors, error_code
from streams.kafka.progress import DEFAULT_STALL_BOUND_MS, ProgressWatch
from streams.kafka.settings import KafkaSettings

log = logging.getLogger("streams.kafka")

DELIVERY_TIMEOUT_MS = 10_000
_BATCH = 1000
_NO_ANSWER = "Kafka did not answer"
_NO_LEADER_YET = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    # librdkafka's own, from ListOffsets when its metadata has no leader for a partition yet:
    # "Failed to query partition leaders: No leaders found" (a CLI read of topics a coordinator
    # had just created, over SASL_SSL on a loaded machine, failed on it once)
    KafkaError._NOENT,
    # The client's metadata already has the new leader's epoch, the broker not yet ("Leader epoch
    # is newer than broker epoch": a CLI read of topics just created failed on it in a CI run)
    KafkaError.UNKNOWN_LEADER_EPOCH,
}


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """One record as read from a topic (not the coordinator's per-stream `TopicRecord`)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None


class HandClients:
    """The clients of a reader of hand-assigned partitions, each made at its first use: an
    admin client for watermarks, and a consumer that never joins its group nor commits, whose
    read ends on a quiet partition (partition EOF)."""

    def __init__(self, settings: KafkaSettings, group_prefix: str) -> None:
        self.settings = settings
        self.group_prefix = group_prefix
        self._admin: AdminClient | None = None
        self._consumer: Consumer | None = None

    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.settings.librdkafka(log_level=0))
        return self._admin

    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(
                self.settings.consumer(
                    **{
                        # Required by librdkafka, never joined: partitions are assigned by hand.
                        "group.id": f"{self.group_prefix}-{uuid.uuid4().hex[:8]}",
                        "enable.auto.commit": False,
                        "enable.auto.offset.store": False,
                        "enable.partition.eof": True,  # so that a read ends on a quiet partition
                        "auto.offset.reset": "earliest",
                        "fetch.wait.max.ms": 100,
                        "log_level": 0,
                    }
                )
            )
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._admin = None


class TopicReader:
    """Reads topics by hand-assigned partitions, each call going on where the last one stopped.

    `read` catches up to the end of each partition as of the moment (its last stable offset:
    the read model's refresh); `start` + `poll` follow whatever arrives from the beginning or
    the end (tail, replay).
    """

    def __init__(self, settings: KafkaSettings, names: Iterable[str], group_prefix: str) -> None:
        self.settings = settings
        self.names = list(names)
        self.group_prefix = group_prefix
        self._positions: dict[tuple[str, int], int] = {}
        self._clients = HandClients(settings, group_prefix)
        self._watch = ProgressWatch(DEFAULT_STALL_BOUND_MS)
        self.renewals = 0  # consumers renewed after a stall (streams.kafka.progress)

    @broker_errors(_NO_ANSWER)
    def read(self, timeout_s: float, apply: Callable[[list[TopicRecord]], None]) -> bool:
        """Pass every record up to the ends (last stable offsets) of now to `apply`, in batches.

        The first call starts at the low watermarks. Returns whether every partition was read
        that far within `timeout_s`. A partition whose last record is a transaction's commit
        marker (which takes an offset and is never delivered) counts as read once the consumer
        reports its end.
        """
        deadline = time.monotonic() + timeout_s
        behind: dict[tuple[str, int], int] = {}
        start: list[TopicPartition] = []
        marks = self._watermarks(timeout_s)
        for (topic, partition), (low, high) in marks.items():
            position = max(self._positions.get((topic, partition), low), low)
            if position > high:  # the topic was deleted and made again: read it anew
                position = low
            if position < high:
                behind[topic, partition] = high
                start.append(TopicPartition(topic, partition, position))
        if not behind:
            return True
        consumer = self._clients.consumer()
        consumer.assign(start)
        try:
            while behind and (remaining := deadline - time.monotonic()) > 0:
                # consume() waits out its timeout unless the batch fills up: keep it short.
                apply(self._consume(consumer, min(remaining, 0.05), behind))
        finally:
            consumer.unassign()
        self._check_progress(marks)
        return not behind

    def _check_progress(self, marks: dict[tuple[str, int], tuple[int, int]]) -> None:
        """A consumer that reads nothing across calls while the ends move on is renewed (the
        read model's refresh would otherwise report "not caught up" for good)."""
        positions = {tp: max(self._positions.get(tp, low), low) for tp, (low, _) in marks.items()}
        ends = {tp: high for tp, (_, high) in marks.items()}
        stall = self._watch.observe(positions, ends, time.time_ns() // 1_000_000)
        if stall is not None:
            log.warning("reading %s stalled, renewing its consumer: %s", ", ".join(self.names),
                        stall.describe())  # fmt: skip
            self._clients.close()
            self.renewals += 1
            self._watch.reset(time.time_ns() // 1_000_000)

    @broker_errors(_NO_ANSWER)
    def start(self, from_end: bool, timeout_s: float) -> None:
        """Assign every partition at its end (or start) now, before `poll`."""
        marks = self._watermarks(timeout_s)
        self._clients.consumer().assign(
            [
                TopicPartition(t, p, high if from_end else low)
                for (t, p), (low, high) in marks.items()
            ]
        )

    @broker_errors(_NO_ANSWER)
    def poll(self, timeout_s: float, max_records: int = 500) -> list[TopicRecord]:
        """The records that arrive within `timeout_s` (fewer if `max_records` come sooner)."""
        return self._consume(self._clients.consumer(), timeout_s, None, max_records)

    def _consume(
        self,
        consumer: Consumer,
        timeout_s: float,
        behind: dict[tuple[str, int], int] | None,
        max_records: int = _BATCH,
    ) -> list[TopicRecord]:
        batch = []
        for msg in consumer.consume(max_records, timeout_s):
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            if topic is None or partition is None or offset is None:
                continue  # a client-wide error: librdkafka retries on its own
            tp = (topic, partition)
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF and behind is not None:
                    self._positions[tp] = max(self._positions.get(tp, 0), offset)
                    behind.pop(tp, None)
                continue
            self._positions[tp] = offset + 1
            if behind is not None and offset + 1 >= behind.get(tp, 0):
                behind.pop(tp, None)
            batch.append(record_of(msg, topic, partition, offset))
        return batch

    def _watermarks(self, timeout_s: float) -> dict[tuple[str, int], tuple[int, int]]:
        return watermarks(self._clients.admin(), self.names, timeout_s)

    def close(self) -> None:
        self._clients.close()


def record_of(msg: Message, topic: str, partition: int, offset: int) -> TopicRecord:
    """A consumed message as a TopicRecord (its timestamp None when the broker has none)."""
    kind, timestamp_ms = msg.timestamp()
    when = None if kind == TIMESTAMP_NOT_AVAILABLE else timestamp_ms
    return TopicRecord(topic, partition, offset, when, msg.key(), msg.value())


def watermarks(
    admin: AdminClient, names: Iterable[str], timeout_s: float
) -> dict[tuple[str, int], tuple[int, int]]:
    """(low, end) offsets of every partition of the existing topics among `names`.

    The end is the last stable offset: what a read_committed consumer can reach now (the high
    watermark when no transaction is open).

    Concrete offsets make a consumer start at once, where a logical one (OFFSET_BEGINNING)
    costs it a 500 ms offset query.
    """
    deadline = time.monotonic() + timeout_s
    metadata = admin.list_topics(timeout=timeout_s)
    partitions = [
        TopicPartition(name, p)
        for name in names
        if name in metadata.topics and metadata.topics[name].error is None
        for p in metadata.topics[name].partitions
    ]
    if not partitions:
        return {}
    while True:
        try:
            return _offsets(admin, partitions, deadline)
        except KafkaException as exc:
            # A topic just created may have no leader yet: ask again while time is left.
            if error_code(exc) not in _NO_LEADER_YET or time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def _offsets(
    admin: AdminClient, partitions: list[TopicPartition], deadline: float
) -> dict[tuple[str, int], tuple[int, int]]:
    low, high = (
        admin.list_offsets(
            {tp: spec for tp in partitions},
            isolation_level=IsolationLevel.READ_COMMITTED,
            request_timeout=_left(deadline),
        )
        for spec in (OffsetSpec.earliest(), OffsetSpec.latest())  # type: ignore[no-untyped-call]
    )
    return {
        (tp.topic, tp.partition): (
            low[tp].result(_left(deadline)).offset,
            high[tp].result(_left(deadline)).offset,
        )
        for tp in partitions
    }


def send(settings: KafkaSettings, topic: str, key: bytes, value: bytes) -> None:
    """Produce one record to `topic` (murmur2 on its key, like Faust and Java clients).

    Returns once the broker acknowledged it; raises BrokerUnavailable if it did not in time.
    """
    send_all(settings, topic, [(key, value)])


def send_all(settings: KafkaSettings, topic: str, records: Iterable[tuple[bytes, bytes]]) -> None:
    """`send` for several (key, value) records, in order (one key's stay in order)."""
    producer = Producer(
        settings.producer(**{"message.timeout.ms": DELIVERY_TIMEOUT_MS, "log_level": 0})
    )
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, _msg: Message) -> None:
        if error is not None:
            errors.append(error)

    with broker_errors(f"could not write to {topic}"):
        for key, value in records:
            producer.produce(topic, value, key, on_delivery=delivered)
        left = producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 5)
    if errors or left:
        reason = errors[0].str() if errors else "no acknowledgement in time"
        where = f"{topic} at {settings.bootstrap_servers}"
        raise BrokerUnavailable(f"could not write to {where}: {reason}")


def _left(deadline: float) -> float:
    """Seconds to a monotonic deadline, at least 0.1 so that a last request can still go out."""
    return max(deadline - time.monotonic(), 0.1)
