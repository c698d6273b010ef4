"""In-process fakes for the coordinator's Processor: a dict store, a recording emitter, a driver.

The driver plays the part of an engine: it sends `control`/`results` values with the key and
partition a murmur2 producer would use, numbers offsets, and turns `partitions_to_tick` into tick
messages, all at explicit `now_ms` values. `Driver(transactional=True)` plays the confluent
engine instead: no delivery callbacks, and `checkpoint(now_ms)` where it commits a transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from streams.coordinator.confluent.delivery import TransactionDelivery
from streams.coordinator.delivery import Delivery
from streams.coordinator.faust.outbox import OutboxDelivery
from streams.coordinator.processor import Processor, partition_of
from streams.topics import Topics

T0 = 1_795_946_400_000  # 2026-11-29T10:00:00Z, the seed's clock
PARTITIONS = 6


def at(hour: int, minute: int, second: int = 0, ms: int = 0) -> int:
    """Epoch ms of hour:minute:second.ms UTC on 2026-11-29."""
    return T0 + ((hour - 10) * 3600 + minute * 60 + second) * 1000 + ms


class InMemoryStore:
    """The Processor's StateStore over a dict; counts writes so tests can see an event was saved.

    With a `buffer` (what a transactional Driver gives it) writes wait there, as in the
    confluent engine's transaction, until `commit` (at the driver's checkpoint) applies them
    to `data`, or `abort` (a restart) drops them; reads see them first.
    """

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.writes = 0
        self.buffer: dict[str, bytes | None] | None = None

    def get(self, stream_id: str) -> bytes | None:
        buffer = self.buffer
        if buffer is not None and stream_id in buffer:
            return buffer[stream_id]
        return self.data.get(stream_id)

    def set(self, stream_id: str, value: bytes) -> None:
        self.writes += 1
        if self.buffer is not None:
            self.buffer[stream_id] = value
        else:
            self.data[stream_id] = value

    def delete(self, stream_id: str) -> None:
        self.writes += 1
        if self.buffer is not None:
            self.buffer[stream_id] = None
        else:
            self.data.pop(stream_id, None)

    def items(self) -> Iterable[tuple[str, bytes]]:
        if not self.buffer:
            return list(self.data.items())
        merged = {**self.data, **self.buffer}
        return [(k, v) for k, v in merged.items() if v is not None]

    def commit(self) -> None:
        """The transaction committed: its writes become the stored data."""
        if self.buffer:
            for stream_id, value in self.buffer.items():
                if value is None:
                    self.data.pop(stream_id, None)
                else:
                    self.data[stream_id] = value
            self.buffer.clear()

    def abort(self) -> None:
        """The transaction aborted (or the process died): its writes are gone."""
        if self.buffer:
            self.buffer.clear()

    def snapshot(self) -> dict[str, bytes]:
        return dict(self.data)


class Sent(NamedTuple):  # a tuple: the benchmark records hundreds of thousands of them
    topic: str
    key: bytes
    value: bytes
    on_delivered: Callable[[], None] | None
    on_failed: Callable[[], None] | None = None

    def json(self) -> Any:
        return json.loads(self.value)


class RecordingEmitter:
    """Records every send; delivery callbacks run only when a test says what the producer did.

    `deliver_all()` confirms everything sent so far, in order; `fail_all()` reports it all as
    given up; `settle(delivered)` confirms what `delivered(sent)` accepts and fails the rest;
    `drop_pending()` forgets the callbacks, which is what a crash does to unconfirmed records.
    """

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self._pending: list[Sent] = []

    def send(
        self,
        topic: str,
        key: bytes,
        value: bytes,
        on_delivered: Callable[[], None] | None = None,
        on_failed: Callable[[], None] | None = None,
    ) -> None:
        sent = Sent(topic, key, value, on_delivered, on_failed)
        self.sent.append(sent)
        if on_delivered is not None or on_failed is not None:
            self._pending.append(sent)

    def settle(self, delivered: Callable[[Sent], bool]) -> int:
        """Confirm the pending sends `delivered` accepts and fail the others; return how many."""
        pending, self._pending = self._pending, []
        for sent in pending:
            callback = sent.on_delivered if delivered(sent) else sent.on_failed
            if callback is not None:
                callback()
        return len(pending)

    def deliver_all(self) -> int:
        return self.settle(lambda sent: True)

    def fail_all(self) -> int:
        return self.settle(lambda sent: False)

    def callbacks_passed(self) -> int:
        """How many sends carried a delivery callback."""
        return sum(1 for s in self.sent if s.on_delivered is not None or s.on_failed is not None)

    def drop_pending(self) -> None:
        self._pending = []

    @property
    def work(self) -> list[Sent]:
        """What was sent, the `streams` views left out (tests/coordinator/test_views.py)."""
        return [s for s in self.sent if not s.topic.endswith(".streams")]

    def on(self, topic: str) -> list[Sent]:
        return [s for s in self.sent if s.topic == topic]

    def values(self, topic: str) -> list[Any]:
        return [s.json() for s in self.on(topic)]

    def clear(self) -> None:
        """Forget what was sent (pending delivery callbacks are kept)."""
        self.sent = []


def delivery(transactional: bool, view_interval_ms: int = 0) -> Delivery:
    """The unit of work of the engine a Driver plays."""
    return TransactionDelivery(view_interval_ms) if transactional else OutboxDelivery()


class Driver:
    """A Processor over an InMemoryStore and a RecordingEmitter, fed like the Faust app feeds it."""

    def __init__(
        self,
        store: InMemoryStore | None = None,
        flush_ms: int = 200,
        partitions: int = PARTITIONS,
        replay_store: InMemoryStore | None = None,
        transactional: bool = False,
        checkpoint_each: bool = True,
        mono_ms: int | None = None,
        catch_up_max_ms: int | None = None,
        view_interval_ms: int = 0,
    ) -> None:
        """`transactional`: play the confluent engine; with `checkpoint_each` it commits a
        transaction after every input and tick it feeds (call `checkpoint` yourself if not).
        `mono_ms`: the Processor's monotonic clock, which a test moves; while None it reads as
        the last `now_ms` the driver was given (the two clocks agree). `catch_up_max_ms`: the
        takeover grace's bound; the test then says when `results` are read (`caught_up`).
        `view_interval_ms`: the confluent engine's `TIDEMARK_VIEW_INTERVAL_MS` (0 here: a view
        at every checkpoint, unless a test is about the interval)."""
        self.store = InMemoryStore() if store is None else store
        self.replay_store = InMemoryStore() if replay_store is None else replay_store
        self.emitter = RecordingEmitter()
        self.topics = Topics()
        self.partitions = partitions
        self.flush_ms = flush_ms
        self.transactional = transactional
        self.checkpoint_each = transactional and checkpoint_each
        if transactional and self.store.buffer is None:
            self.store.buffer = {}  # the open transaction's writes
        self.mono_ms = mono_ms
        self.catch_up_max_ms = catch_up_max_ms
        self.view_interval_ms = view_interval_ms
        self._last_now_ms = 0
        self.processor = Processor(
            self.topics,
            partitions,
            self.store,
            self.emitter,
            flush_ms,
            replay_store=self.replay_store,
            replay_concurrency=1,
            monotonic_ms=self._monotonic_ms,
            catch_up_max_ms=catch_up_max_ms,
            delivery=delivery(transactional, view_interval_ms),
        )
        self._offsets: dict[str, int] = {}

    def restart(self) -> Driver:
        """A new process over the same table: nothing in memory survives, callbacks are lost.

        Transactional, what was not checkpointed is lost too (its transaction never committed).
        """
        self.emitter.drop_pending()
        self.store.abort()  # what no checkpoint committed
        return Driver(
            self.store,
            self.flush_ms,
            self.partitions,
            self.replay_store,
            self.transactional,
            self.checkpoint_each,
            self.mono_ms,
            self.catch_up_max_ms,
            self.view_interval_ms,
        )

    def _monotonic_ms(self) -> int:
        return self._last_now_ms if self.mono_ms is None else self.mono_ms

    def checkpoint(self, now_ms: int) -> None:
        """Where the transactional engine commits: state written, commits flushed."""
        self.processor.checkpoint(now_ms)
        self.store.commit()

    def abort(self) -> None:
        """What the transactional engine does after an abort: the open transaction's writes
        are dropped, then the Processor forgets what it derived from them."""
        self.store.abort()
        self.processor.reset()

    def partition(self, stream_id: str) -> int:
        return partition_of(stream_id.encode(), self.partitions)

    def assign(self, *stream_ids: str) -> None:
        self.processor.on_assigned(self.partition(s) for s in stream_ids)

    def caught_up(self, *stream_ids: str) -> None:
        """What the engine says once it has read `results` of these streams' partitions up to
        where they stood at assignment."""
        for p in {self.partition(s) for s in stream_ids}:
            self.processor.on_caught_up(p)

    def send(
        self,
        topic: str,
        value: Any,
        now_ms: int,
        key: bytes | None = None,
        partition: int | None = None,
    ) -> None:
        """Send `value` (a dict is JSON-encoded) keyed and partitioned by its stream_id."""
        raw = value if isinstance(value, bytes) or value is None else json.dumps(value).encode()
        if key is None and isinstance(value, dict) and isinstance(value.get("stream_id"), str):
            key = value["stream_id"].encode()
        if partition is None:
            partition = 0 if key is None else partition_of(key, self.partitions)
        self._last_now_ms = now_ms
        offset = self._offsets.get(topic, 0)
        self._offsets[topic] = offset + 1
        self.processor.on_message(topic, partition, offset, key, raw, now_ms)
        if self.checkpoint_each and topic != self.topics.ticks:
            self.checkpoint(now_ms)

    def next_offset(self, topic: str) -> int:
        return self._offsets.get(topic, 0)

    def control(self, value: Any, now_ms: int, **kw: Any) -> None:
        self.send(self.topics.control, value, now_ms, **kw)

    def result(self, value: Any, now_ms: int, **kw: Any) -> None:
        self.send(self.topics.results, value, now_ms, **kw)

    def upsert(self, stream_id: str, now_ms: int, **config: Any) -> None:
        fields = {"type": "upsert", "stream_id": stream_id, "start_ms": T0, **config}
        self.control(fields, now_ms)

    def tick(self, now_ms: int) -> list[int]:
        """Tick every partition the processor asks for, as the timer and tick topic do."""
        self._last_now_ms = now_ms
        ticked = self.processor.partitions_to_tick(now_ms)
        for p in ticked:
            self.send(self.topics.ticks, None, now_ms, partition=p)
        if self.checkpoint_each:
            self.checkpoint(now_ms)
        return ticked

    def tasks(self) -> list[dict[str, Any]]:
        return self.emitter.values(self.topics.tasks)

    def commits(self) -> list[dict[str, Any]]:
        return self.emitter.values(self.topics.commits)

    def bypassed(self) -> list[Sent]:
        return self.emitter.on(self.topics.bypassed)

    def rejected(self) -> list[dict[str, Any]]:
        return self.emitter.values(self.topics.rejected)


def ack(task: dict[str, Any], ack_ms: int | None = None, **extra: Any) -> dict[str, Any]:
    """The worker's ack of a task (by default of the whole window)."""
    return {
        **_attempt(task),
        "outcome": "ack",
        "ack_ms": task["end_ms"] if ack_ms is None else ack_ms,
        **extra,
    }


def nack(task: dict[str, Any], kind: str = "no_data", **extra: Any) -> dict[str, Any]:
    error = {"kind": kind, "message": f"{kind} in {task['task_id']}"}
    return {**_attempt(task), "outcome": "nack", "error": error, **extra}


def heartbeat(task: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**_attempt(task), "outcome": "heartbeat", **extra}


def _attempt(task: dict[str, Any]) -> dict[str, Any]:
    return {k: task[k] for k in ("stream_id", "start_ms", "end_ms", "attempt")}
