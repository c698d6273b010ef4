"""The coordinator's adapter logic, free of Faust: decode, load, decide, save, emit.

`Processor.on_message` handles one input from `control`, `results` or the internal `ticks`
topic. The Faust app (streams/coordinator/app.py) feeds it events and gives it a table-backed
`StateStore` and a producer-backed `Emitter`; tests drive it in-process with in-memory ones.

Everything written for a stream happens while handling an event of that stream's partition
(the tick for partition p touches only streams of p), because Faust puts a table write in the
changelog partition of the event being processed.
"""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict
from collections.abc import Iterable

import orjson
from aiokafka.partitioner import murmur2

from streams.coordinator.index import DueIndex
from streams.coordinator.metrics import CoordinatorMetrics
from streams.coordinator.ports import Emitter, StateStore
from streams.coordinator.record import Record
from streams.coordinator.replays import ReplayLane
from streams.coordinator.topics import Topics
from streams.core import (
    Commit,
    Decision,
    Replay,
    Result,
    Upsert,
    advance,
    apply_control,
    apply_result,
    flush,
    next_due_ms,
)
from streams.errors import InvalidInput
from streams.wire import decode_control, decode_result, rejected_value

log = logging.getLogger("streams.coordinator")

# Flush a stream's commit at once when this many windows wait, whatever the interval says.
FLUSH_MAX_WINDOWS = 256
# A tick that has not come back after this long is considered lost and sent again.
TICK_RESEND_MS = 5000
# Decoded records kept in memory, so that a load whose stored bytes are unchanged skips the
# JSON decode and validation (about a third of the work per input).
RECORD_CACHE_SIZE = 100_000


def partition_of(key: bytes, partitions: int) -> int:
    """The partition the Java client, aiokafka and Faust give `key` (murmur2)."""
    return int(murmur2(key) & 0x7FFFFFFF) % partitions


def _json(value: object) -> bytes:
    return orjson.dumps(value)


class Processor:
    def __init__(
        self,
        topics: Topics,
        partitions: int,
        store: StateStore,
        emitter: Emitter,
        flush_ms: int = 200,
        replay_store: StateStore | None = None,
        replay_concurrency: int = 2,
        metrics: CoordinatorMetrics | None = None,
    ) -> None:
        self.topics = topics
        self.partitions = partitions
        self.store = store
        self.emitter = emitter
        self.flush_ms = flush_ms
        self.index = DueIndex()
        self.stats: Counter[str] = Counter()
        self.metrics = CoordinatorMetrics() if metrics is None else metrics
        self._assigned: set[int] = set()
        self._unbuilt: set[int] = set()
        self._tick_sent: dict[int, int] = {}
        self._last_flush: dict[str, int] = {}
        self._commit_delivered: dict[str, int] = {}
        self._bypass_delivered: dict[str, set[int]] = {}
        self._cache: OrderedDict[str, tuple[bytes, Record]] = OrderedDict()
        self.replays = (
            None
            if replay_store is None
            else ReplayLane(
                topics, replay_store, emitter, self.stats, replay_concurrency, self.metrics
            )
        )

    # -- partition ownership -------------------------------------------------------------

    def on_assigned(self, partitions: Iterable[int]) -> None:
        """New partitions: their index is built from the table at their first tick."""
        for p in partitions:
            if p not in self._assigned:
                self._assigned.add(p)
                self._unbuilt.add(p)
                self._tick_sent.pop(p, None)

    def on_revoked(self, partitions: Iterable[int]) -> None:
        revoked = set(partitions)
        for p in revoked:
            self._assigned.discard(p)
            self._unbuilt.discard(p)
            self._tick_sent.pop(p, None)
            self.index.drop(p)
            self.metrics.drop_partition(p)
        if self.replays is not None and revoked:
            self.replays.forget(lambda s: partition_of(s.encode(), self.partitions) in revoked)

    @property
    def assigned(self) -> frozenset[int]:
        return frozenset(self._assigned)

    def partitions_to_tick(self, now_ms: int) -> list[int]:
        """Owned partitions that need a tick now: unbuilt, or with something due."""
        due = []
        for p in sorted(self._assigned):
            sent = self._tick_sent.get(p)
            if sent is not None and now_ms - sent < TICK_RESEND_MS:
                continue  # one tick in flight per partition is enough
            wake = self.index.next_wake_ms(p)
            if p in self._unbuilt or (wake is not None and wake <= now_ms):
                self._tick_sent[p] = now_ms
                due.append(p)
        return due

    # -- inputs ----------------------------------------------------------------------------

    def on_message(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        now_ms: int,
    ) -> None:
        """Handle one input. Malformed input is rejected (to `rejected`), never raised.

        An exception from here is a bug; the caller logs it and goes on with the next input.
        """
        try:
            self._on_message(topic, partition, offset, key, value, now_ms)
        except Exception:
            # A bug: a cached record may be half-updated, so trust only the table from now on.
            self._cache.clear()
            raise

    def _on_message(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        now_ms: int,
    ) -> None:
        if topic == self.topics.ticks:
            self.on_tick(partition, now_ms)
            return
        try:
            if topic == self.topics.results:
                result = decode_result(value)
                stream_id = result.stream_id
                self._check_key(stream_id, key, partition)
                self.stats[f"results_{result.outcome}"] += 1
                self.metrics.result(result.outcome)
                record = self._load(stream_id)
                if record is not None and self._replay_result(partition, record, result, now_ms):
                    return
                decision = apply_result(record.state if record else None, result, now_ms)
            elif topic == self.topics.control:
                control = decode_control(value)
                stream_id = (
                    control.config.stream_id if isinstance(control, Upsert) else control.stream_id
                )
                self._check_key(stream_id, key, partition)
                record = self._load(stream_id)
                if isinstance(control, Replay):
                    self._replay_request(partition, record, control, now_ms)
                    return
                decision = apply_control(record.state if record else None, control, now_ms)
            else:
                raise InvalidInput("topic", f"{topic!r} is not an input topic")
        except InvalidInput as exc:
            self._reject(topic, partition, offset, str(exc), key, value)
            return
        if decision.rejected is not None:
            self._reject(topic, partition, offset, decision.rejected, key, value)
            return
        if decision.ignored is not None:
            self.stats[decision.ignored] += 1
            self.metrics.ignored(decision.ignored)
            return
        if topic == self.topics.results:
            self.metrics.accepted(stream_id, result, now_ms)
        self._apply(partition, stream_id, record, decision, now_ms)

    def on_tick(self, partition: int, now_ms: int) -> None:
        """Time-driven work of one partition: dispatches, deadlines and flushes that are due."""
        self._tick_sent.pop(partition, None)
        if partition not in self._assigned:
            return
        if partition in self._unbuilt:
            self._rebuild(self._unbuilt & self._assigned, now_ms)
        for stream_id in self.index.pop_due(partition, now_ms):
            try:
                record = self._load(stream_id)
            except InvalidInput as exc:
                log.error("tick for %r skipped: %s", stream_id, exc)
                continue
            if record is None:
                continue
            if self.replays is not None:
                self.replays.advance(record.state, now_ms)
            self._apply(partition, stream_id, record, advance(record.state, now_ms), now_ms)

    # -- the steps -------------------------------------------------------------------------

    def _check_key(self, stream_id: str, key: bytes | None, partition: int) -> None:
        expected = stream_id.encode()
        if key != expected:
            raise InvalidInput("key", f"must be the stream_id {stream_id!r} as UTF-8")
        owner = partition_of(expected, self.partitions)
        if owner != partition:
            raise InvalidInput(
                "partition",
                f"key {stream_id!r} belongs to partition {owner} of {self.partitions}, "
                f"not {partition}; produce with the murmur2 partitioner "
                "(confluent-kafka: partitioner=murmur2_random)",
            )

    def _load(self, stream_id: str) -> Record | None:
        """The stream's record with delivery confirmations applied; None if it has none.

        Raises InvalidInput when the stored value cannot be read, so that the input that needed
        it is rejected with that reason instead of stopping the coordinator.
        """
        raw = self.store.get(stream_id)
        if raw is None:
            return None
        cached = self._cache.get(stream_id)
        if cached is not None and cached[0] == raw:
            record: Record | None = cached[1]
        else:
            record = self._load_raw(stream_id, raw)
        if record is None:
            raise InvalidInput("state", f"the stored state of {stream_id!r} is unreadable")
        # Confirmations are only forgotten once a save has recorded them (see _apply).
        delivered = self._commit_delivered.get(stream_id)
        if delivered is not None:
            record.confirm_commit(delivered)
        bypasses = self._bypass_delivered.get(stream_id)
        if bypasses:
            record.confirm_bypasses(bypasses)
        return record

    def _apply(
        self,
        partition: int,
        stream_id: str,
        record: Record | None,
        decision: Decision,
        now_ms: int,
    ) -> None:
        """Emit what the decision says, flush commits when due, save, and re-index."""
        state = decision.state
        self.stats["timeouts"] += decision.timeouts
        self.stats["requeues"] += decision.requeues
        self.metrics.applied(partition, stream_id, decision)
        if state is None:
            self.store.delete(stream_id)
            if self.replays is not None:
                self.replays.delete(stream_id)
            self.index.set(partition, stream_id, None)
            self._forget(stream_id)
            return
        if record is None:
            record = Record.new(state)
        record.state = state
        key = stream_id.encode()
        for task in decision.tasks:
            self.emitter.send(self.topics.tasks, key, _json(task.to_wire()))
        self.stats["tasks"] += len(decision.tasks)
        for bypass in decision.bypasses:
            wire = bypass.to_wire()
            record.pending_bypasses.append(wire)
            self._send_bypass(stream_id, wire)
        self.stats["bypasses"] += len(decision.bypasses)
        if decision.bypasses and self.replays is not None:
            self.replays.note_bypasses(stream_id, decision.bypasses)
        flush_at = self._flush_if_due(record, now_ms)
        encoded = record.encode()
        self.store.set(stream_id, encoded)
        self._remember(stream_id, encoded, record)
        self._commit_delivered.pop(stream_id, None)  # now recorded in the saved outbox
        self._bypass_delivered.pop(stream_id, None)
        self._reindex(partition, record, flush_at)

    def _reindex(self, partition: int, record: Record, flush_at: int | None = None) -> None:
        """When the stream next needs the clock: a dispatch, a deadline, a flush or a replay."""
        stream_id = record.state.config.stream_id
        wakes = [next_due_ms(record.state), flush_at]
        if self.replays is not None:
            wakes.append(self.replays.next_due_ms(stream_id))
        due = [w for w in wakes if w is not None]
        self.index.set(partition, stream_id, min(due) if due else None)

    def _replay_request(
        self, partition: int, record: Record | None, replay: Replay, now_ms: int
    ) -> None:
        if record is None:
            raise InvalidInput("stream_id", "unknown stream")
        if self.replays is None:
            raise InvalidInput("type", "replay is not enabled on this coordinator")
        rejected = self.replays.request(record.state, replay, now_ms)
        if rejected is not None:
            raise InvalidInput("replay", rejected)
        self._reindex(partition, record)

    def _replay_result(self, partition: int, record: Record, result: Result, now_ms: int) -> bool:
        """Handle a result of the replay lane; False when it belongs to the live lane."""
        if self.replays is None:
            return False
        decision = self.replays.on_result(record.state, result, now_ms)
        if decision is None:
            return False
        if decision.rejected is not None:
            raise InvalidInput("attempt", decision.rejected)
        if decision.ignored is not None:
            self.stats[decision.ignored] += 1
            self.metrics.ignored(decision.ignored)
        self._reindex(partition, record)
        return True

    def _flush_if_due(self, record: Record, now_ms: int) -> int | None:
        """Announce the stream's finished windows at most once per flush interval.

        The first commit after a quiet interval goes out at once (so ack-to-commit latency is
        low); later ones within the interval are coalesced into one. Returns when to flush
        next if windows are left waiting.
        """
        state = record.state
        if not state.unannounced:
            return None
        stream_id = state.config.stream_id
        last = self._last_flush.get(stream_id)
        if (
            last is not None
            and now_ms - last < self.flush_ms
            and len(state.unannounced) < FLUSH_MAX_WINDOWS
        ):
            return last + self.flush_ms
        record.state, commit = flush(state, now_ms)
        if commit is not None:
            record.announce(commit)
            self._send_commit(commit)
            self._last_flush[stream_id] = now_ms
        return None

    def _send_commit(self, commit: Commit) -> None:
        stream_id = commit.stream_id

        def delivered() -> None:
            seen = self._commit_delivered.get(stream_id, -1)
            self._commit_delivered[stream_id] = max(seen, commit.downstream_ms)

        self.emitter.send(
            self.topics.commits, stream_id.encode(), _json(commit.to_wire()), delivered
        )
        self.stats["commits"] += 1
        self.metrics.committed(commit)

    def _send_bypass(self, stream_id: str, wire: dict[str, object]) -> None:
        start_ms = wire["start_ms"]
        assert isinstance(start_ms, int)

        def delivered() -> None:
            self._bypass_delivered.setdefault(stream_id, set()).add(start_ms)

        key = f"{stream_id}/{start_ms}".encode()
        self.emitter.send(self.topics.bypassed, key, _json(wire), delivered)

    def _rebuild(self, partitions: set[int], now_ms: int) -> None:
        """Index the streams of newly owned partitions and re-announce their outboxes."""
        count = 0
        for stream_id, raw in self.store.items():
            p = partition_of(stream_id.encode(), self.partitions)
            if p not in partitions:
                continue
            self._cache.pop(stream_id, None)  # another coordinator may have changed it
            record = self._load_raw(stream_id, raw)
            if record is None:
                continue
            count += 1
            self.metrics.track(p, record.state)
            commit = record.outbox_commit(now_ms)
            if commit is not None:
                self._send_commit(commit)
                self.stats["reannounced"] += 1
            for wire in record.pending_bypasses:
                self._send_bypass(stream_id, wire)
            wake = next_due_ms(record.state)
            if record.state.unannounced:
                wake = now_ms if wake is None else min(wake, now_ms)
            self.index.set(p, stream_id, wake)
        if self.replays is not None:
            for stream_id in self.replays.rebuild(
                lambda s: partition_of(s.encode(), self.partitions) in partitions
            ):
                p = partition_of(stream_id.encode(), self.partitions)
                self.index.set(p, stream_id, now_ms)  # its first tick re-indexes it fully
        self._unbuilt -= partitions
        log.info("indexed %d streams of partitions %s", count, sorted(partitions))

    def _load_raw(self, stream_id: str, raw: bytes) -> Record | None:
        try:
            return Record.decode(raw)
        except (ValueError, KeyError, TypeError, InvalidInput) as exc:
            log.error("unreadable state for stream %r, left alone: %s", stream_id, exc)
            return None

    def _reject(
        self,
        topic: str,
        partition: int,
        offset: int,
        reason: str,
        key: bytes | None,
        value: bytes | None,
    ) -> None:
        self.stats["rejected"] += 1
        self.metrics.rejected(topic)
        log.warning("rejected %s[%d]@%d: %s", topic, partition, offset, reason)
        self.emitter.send(
            self.topics.rejected,
            key or b"",
            rejected_value(topic, partition, offset, reason, key, value),
        )

    def _remember(self, stream_id: str, encoded: bytes, record: Record) -> None:
        cache = self._cache
        cache[stream_id] = (encoded, record)
        cache.move_to_end(stream_id)
        if len(cache) > RECORD_CACHE_SIZE:
            cache.popitem(last=False)

    def _forget(self, stream_id: str) -> None:
        self._cache.pop(stream_id, None)
        self._last_flush.pop(stream_id, None)
        self._commit_delivered.pop(stream_id, None)
        self._bypass_delivered.pop(stream_id, None)
