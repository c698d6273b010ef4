"""The exactly-once coordinator's Kafka clients: one consumer and one transactional producer.

KIP-447 (Kafka Streams' exactly-once v2): one transactional producer per process, fenced
through the consumer group (the group metadata sent with the offsets) and through a stable
`transactional.id` per instance (a restart fences its predecessor at `init_transactions`).
librdkafka's errors are translated here, in one place, into three outcomes the engine acts on:
retry the call, abort the transaction (`TransactionAborted`), or renew the clients
(`TransactionFatal` and its kinds: streams.coordinator.confluent.renewal).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from streams.errors import BrokerUnavailable
from streams.kafka.admin import wait_ready
from streams.kafka.caller import Caller
from streams.kafka.changelog import watermarks_of
from streams.kafka.progress import KafkaProgress
from streams.kafka.settings import KafkaSettings
from streams.kafka.txn_calls import CALL_TIMEOUT_S, classify, retrying
from streams.kafka.txn_errors import (
    AbortFailed,
    ConsumerStalled,
    ProducerFenced,
    TransactionAborted,
    TransactionFatal,
)

log = logging.getLogger("streams.kafka")

# Kafka Streams' EOS default: a coordinator that stalls this long gets its transaction aborted
# by the broker, and a new owner waits at most this long for a dead owner's open transaction.
TRANSACTION_TIMEOUT_MS = 10_000
# How long a probe of the cluster (a fresh client's metadata request) waits for an answer.
PROBE_TIMEOUT_S = 5.0


class Input(NamedTuple):  # a tuple: one is made per message, and a dataclass costs 4 times more
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


Partitions = Callable[[list[tuple[str, int]]], None]


class TransactionalClients:
    """The consumer of the coordinators' group and the process's transactional producer."""

    def __init__(
        self,
        settings: KafkaSettings,
        group_id: str,
        transactional_id: str,
        session_timeout_ms: int,
        linger_ms: int = 5,
    ) -> None:
        self._consumer = Consumer(
            settings.librdkafka(
                **{
                    "group.id": group_id,
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "auto.offset.reset": "earliest",
                    # control[p] and results[p] go to the same member: a stream's inputs meet
                    # (the broker's range assignor co-partitions too: docs/kafka4.md).
                    **settings.group(
                        "range", "range", session_timeout_ms, max(1000, session_timeout_ms // 5)
                    ),
                    "fetch.wait.max.ms": 20,
                    "queued.max.messages.kbytes": 65536,
                }
            )
        )
        self._producer = Producer(
            settings.producer(
                **{
                    "transactional.id": transactional_id,
                    "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                    # The changelog admits records of up to 8 MiB (streams.topics).
                    "message.max.bytes": 8 * 1024 * 1024 + 65536,
                    "linger.ms": linger_ms,
                    # The engine sends a transaction's offsets before its outputs are flushed.
                    # Sent right after the previous commit, AddOffsetsToTxn is refused
                    # (CONCURRENT_TRANSACTIONS) until that commit's markers are written, and is
                    # retried after this backoff: 100 ms by default, which made such a
                    # transaction take p50 102 ms against 24.9 ms at 10 (transaction_bench.py;
                    # AddPartitionsToTxn's own retry is 20 ms). Retries back off exponentially
                    # from it, up to 1 s.
                    "retry.backoff.ms": 10,
                    "batch.num.messages": 10_000,
                    "queue.buffering.max.messages": 500_000,
                    "queue.buffering.max.kbytes": 262_144,
                    "error_cb": self._on_error,
                }
            )
        )
        self._in_transaction = False
        self._deadline_s: float | None = None  # the open commit's, from send_offsets on
        self._caller = Caller()
        self._detached = False
        self._closed = False
        # Whether the consumer still reads what it could (no verdict while no broker answers).
        self._progress = KafkaProgress(settings)
        self._incremental = settings.group_protocol == "consumer"

    @staticmethod
    def _on_error(err: KafkaError) -> None:
        if err.code() != KafkaError._TRANSPORT:  # the engine reports an unreachable broker
            log.error("producer: %s", err.str())

    # -- the group ----------------------------------------------------------------------

    def subscribe(
        self, topics: Sequence[str], assigned: Partitions, revoked: Partitions, lost: Partitions
    ) -> None:
        def pairs(tps: Iterable[TopicPartition]) -> list[tuple[str, int]]:
            return [(tp.topic, tp.partition) for tp in tps]

        def on_assign(consumer: Consumer, tps: list[TopicPartition]) -> None:
            if not self._detached:
                assigned(pairs(tps))

        def on_revoke(consumer: Consumer, tps: list[TopicPartition]) -> None:
            if not self._detached:
                revoked(pairs(tps))

        def on_lost(consumer: Consumer, tps: list[TopicPartition]) -> None:
            if not self._detached:
                lost(pairs(tps))

        self._consumer.subscribe(
            list(topics), on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost
        )

    def poll(self, max_messages: int, timeout_s: float) -> list[Input]:
        """The next inputs (possibly none); rebalance callbacks run inside this call."""
        out: list[Input] = []
        append = out.append
        for msg in self._consumer.consume(max_messages, timeout_s):
            err = msg.error()
            if err is not None:
                if err.fatal():
                    raise TransactionFatal(f"consumer: {err.str()}")
                if err.code() != KafkaError._PARTITION_EOF:
                    log.warning("consumer: %s", err.str())
                continue
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            assert topic is not None and partition is not None and offset is not None
            append(Input(topic, partition, offset, msg.key(), msg.value()))
        # A member may rightly own no partition (more coordinators than partitions): only
        # records left unread count. The check asks the ends every 5 s without waiting.
        stall = self._progress.check(self._consumer, expect_assignment=False)
        if stall is not None:
            raise ConsumerStalled(f"consumer: {stall.describe()}")
        return out

    def committed(self, tps: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The group's committed offset per partition, or the low watermark where it has none.

        Under read_committed the fetch waits (UNSTABLE_OFFSET_COMMIT) until a previous owner's
        open transaction is resolved, so what follows sees all of its state or none of it.
        """
        if not tps:
            return {}
        deadline = time.monotonic() + CALL_TIMEOUT_S
        found = retrying(
            lambda timeout_s: self._consumer.committed(
                [TopicPartition(t, p) for t, p in tps], timeout=timeout_s
            ),
            "fetching committed offsets",
            deadline,
        )
        offsets = {}
        for tp in found:
            offset = tp.offset
            if offset == OFFSET_INVALID or offset < 0:
                offset, _ = watermarks_of(self._consumer, tp.topic, tp.partition)
            offsets[(tp.topic, tp.partition)] = offset
        return offsets

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(low, high) of a partition, asked through the group's consumer."""
        return watermarks_of(self._consumer, topic, partition)

    def assign(self, offsets: dict[tuple[str, int], int]) -> None:
        """Start reading the given partitions at the given offsets (inside on_assign): all of
        them under `classic` (eager), the ones added under `consumer` (incremental)."""
        tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        try:
            if self._incremental:
                self._consumer.incremental_assign(tps)
            else:
                self._consumer.assign(tps)
        except KafkaException as exc:
            raise classify(exc, "assign") from exc

    def seek(self, offsets: dict[tuple[str, int], int]) -> None:
        try:
            for (topic, partition), offset in offsets.items():
                self._consumer.seek(TopicPartition(topic, partition, offset))
        except KafkaException as exc:  # e.g. a partition no longer assigned: new clients
            raise classify(exc, "seek") from exc

    # -- the transaction ----------------------------------------------------------------

    def init_transactions(self) -> None:
        """Fence any previous instance with this transactional.id and abort its transaction."""
        deadline = time.monotonic() + CALL_TIMEOUT_S
        retrying(self._producer.init_transactions, "init_transactions", deadline, self._caller)

    def produce(
        self,
        topic: str,
        key: bytes,
        value: bytes | None,
        partition: int | None = None,
        on_delivery: Callable[[KafkaError | None, Any], None] | None = None,
    ) -> None:
        if not self._in_transaction:
            self._begin()
        if partition is None and on_delivery is None:  # tasks, commits: the usual case
            try:
                self._producer.produce(topic, value, key)
                return
            except BufferError:
                pass  # served below
            except KafkaException as exc:
                raise classify(exc, f"producing to {topic}") from exc
        kwargs: dict[str, Any] = {}
        if partition is not None:
            kwargs["partition"] = partition
        if on_delivery is not None:
            kwargs["on_delivery"] = on_delivery
        while True:
            try:
                self._producer.produce(topic, value, key, **kwargs)
                return
            except BufferError:  # the local queue is full: serve deliveries, then again (a
                self._producer.poll(0.01)  # message times out within the transaction timeout)
            except KafkaException as exc:
                raise classify(exc, f"producing to {topic}") from exc

    @property
    def in_transaction(self) -> bool:
        return self._in_transaction

    def _begin(self) -> None:
        try:
            self._producer.begin_transaction()
        except KafkaException as exc:
            raise classify(exc, "begin_transaction") from exc
        self._in_transaction = True

    def flush(self, timeout_s: float = CALL_TIMEOUT_S) -> None:
        """Wait for every produced message (the engine leaves this to `commit_transaction`);
        any undelivered one means the transaction aborts. One call: stop signals are served on
        a thread of their own (streams.coordinator.confluent.signals), not between slices of it."""
        left = self._producer.flush(timeout_s)
        if left:
            raise TransactionAborted(f"{left} messages undelivered after {timeout_s:g} s")

    def send_offsets(self, offsets: dict[tuple[str, int], int]) -> None:
        """Add the input offsets, with the group metadata, to the open transaction (beginning
        one if none is open). Offsets go in every transaction, even one of time-driven writes
        only, so that a zombie (a member the group has moved on from) can never commit."""
        if not self._in_transaction:
            self._begin()
        # One deadline for both steps of a commit, as when they were one call.
        deadline = self._deadline_s = time.monotonic() + CALL_TIMEOUT_S
        tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        if not tps:
            return
        metadata = self._consumer.consumer_group_metadata()
        retrying(
            lambda t: self._producer.send_offsets_to_transaction(tps, metadata, t),
            "send_offsets_to_transaction",
            deadline,
            self._caller,
        )

    def commit_transaction(self) -> None:
        """Commit the open transaction (beginning one if none is open).

        Committing flushes every output first, serving their delivery callbacks, and fails
        (abortable) if any was not delivered; a slice that times out while it waits is resumed.
        """
        if not self._in_transaction:
            self._begin()
        deadline, self._deadline_s = self._deadline_s or time.monotonic() + CALL_TIMEOUT_S, None
        retrying(self._producer.commit_transaction, "commit_transaction", deadline, self._caller)
        self._in_transaction = False

    def commit(self, offsets: dict[tuple[str, int], int]) -> None:  # both steps at once
        self.send_offsets(offsets)
        self.commit_transaction()

    def abort(self) -> None:
        """Abort the open transaction, if any; a failure to abort needs new clients."""
        if not self._in_transaction:
            return
        self._in_transaction, self._deadline_s = False, None
        deadline = time.monotonic() + CALL_TIMEOUT_S
        try:
            retrying(self._producer.abort_transaction, "abort_transaction", deadline, self._caller)
        except ProducerFenced:
            raise
        except (TransactionAborted, TransactionFatal) as exc:
            raise AbortFailed(str(exc)) from exc

    def close(self) -> None:
        """Leave the group (its revocation callback runs here) and drop both clients."""
        if self._closed:
            return
        self._closed = True
        try:
            self._consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.warning("closing the consumer: %s", exc)
        if not self._detached:
            self._producer.flush(1)
        del self._producer  # their last references: librdkafka's handles are destroyed here
        del self._progress

    def detach(self) -> None:
        """From now on no rebalance callback reaches the engine and nothing is flushed at
        close: these clients are being abandoned, their open transaction void (the next
        producer of this transactional.id aborts it at init_transactions)."""
        self._detached = True
        self._in_transaction = False


def cluster_answers(settings: KafkaSettings, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a fresh client's metadata request is answered within `timeout_s`: tells a gone
    cluster (no answer) from stuck clients of our own (their calls fail while this answers)."""
    try:
        wait_ready(settings, timeout_s)
    except BrokerUnavailable:
        return False
    return True
