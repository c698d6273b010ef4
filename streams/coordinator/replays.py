"""The replay lane's adapter: load a stream's replay state, decide through the core, save, emit.

Replay state lives in its own table (`replays`, keyed like the streams table), so the hot path
of live windows never reads or writes it; it is touched on bypasses, replay requests and results
of replay tasks only. Windows in the lane never move `downstream_ms`.

A replayed window is announced in a commit whose `previous_ms` and `downstream_ms` are both the
stream's last announced mark (`announced_ms`, not the in-memory `downstream_ms`, which may be
ahead of what `commits` holds), and only after the live commit that moved the mark over the
window: the core dispatches a replay once the live lane has passed the window, and when its ack
comes while that commit still waits (for the checkpoint, or the flush interval), the caller's
`announce_live` flushes it first. So on `commits` each stream's records form one chain.

How a replayed window is announced is the engine's delivery's (`ReplayAnnouncer`, which the
Delivery gives): in a Kafka transaction the outputs commit with the state, so it is sent once;
at least once (streams.coordinator.faust.outbox.OutboxReplayAnnouncer), it stays in its state's
`announcing` until its commit and its tombstone are both delivered, like a live commit in its
record's outbox.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeAlias

import orjson

from streams.coordinator.admission.ledger import replay_flights
from streams.coordinator.ports import Emitter, StateStore
from streams.coordinator.telemetry.metrics import CoordinatorMetrics
from streams.core import (
    BypassRecord,
    Commit,
    CommittedWindow,
    Replay,
    ReplayDecision,
    ReplayState,
    Result,
    StreamState,
)
from streams.core import replay as lane
from streams.core.lanes import Lane, lane_of
from streams.core.retention import expire_bypasses, oldest_bypass_ms
from streams.errors import InvalidInput
from streams.topics import Topics
from streams.wire import bypassed_key, encode_bypassed, encode_commit, encode_task

if TYPE_CHECKING:
    from streams.coordinator.admission import Admission

# A message's delivery callbacks: (on_delivered, on_failed).
Watch: TypeAlias = tuple[Callable[[], None], Callable[[], None]]

log = logging.getLogger("streams.coordinator")


class ReplayLane:
    admission: Admission | None = None  # the gate before each dispatch (set by the Processor)

    def __init__(
        self,
        topics: Topics,
        store: StateStore,
        emitter: Emitter,
        stats: Counter[str],
        concurrency: int = 2,
        metrics: CoordinatorMetrics | None = None,
        announcer: ReplayAnnouncer | None = None,
    ) -> None:
        self.topics = topics
        self.store = store
        self.emitter = emitter
        self.stats = stats
        self.concurrency = concurrency
        self.metrics = metrics
        self.announcer = ReplayAnnouncer(topics, emitter) if announcer is None else announcer
        self._busy: set[str] = set()  # streams with a replay queued, in flight or announcing
        # When each owned stream's oldest listed window (not being replayed) was bypassed: what
        # the scavenger needs to know when its retention ends, without reading the table.
        self._oldest: dict[str, int] = {}
        # Streams whose replays wait for admission: since when, and the last decision's asks.
        self._waiting_ms: dict[str, int] = {}
        self._asked: _Asked | None = None

    def busy(self, stream_id: str) -> bool:
        return stream_id in self._busy

    def next_due_ms(self, live: StreamState) -> int | None:
        stream_id = live.config.stream_id
        if stream_id not in self._busy:
            return None
        state = self._load(stream_id)
        if state is None:
            return None
        due_ms = lane.next_due_ms(state, live, self.concurrency)
        if due_ms != 0 or stream_id not in self._waiting_ms:
            return due_ms
        # Parked: admission wakes it when its source has room (its deadlines still count).
        deadlines = [w.deadline_ms for w in state.listed if w.attempt]
        return min(deadlines) if deadlines else None

    def flying(self, stream_id: str) -> int:
        """How many of the stream's replays are in flight (for a rebuild's counts)."""
        state = self._load(stream_id)
        return 0 if state is None else state.in_flight

    def oldest_bypass_ms(self, stream_id: str) -> int | None:
        return self._oldest.get(stream_id)

    def note_bypasses(self, stream_id: str, bypasses: Iterable[BypassRecord]) -> None:
        state = self._load(stream_id) or ReplayState(stream_id)
        for record in bypasses:
            for start_ms in lane.note_bypass(state, record):  # beyond MAX_LISTED: unlisted
                self.emitter.send(self.topics.bypassed, bypassed_key(stream_id, start_ms), None)
        self._save(state)

    def expire(self, live: StreamState, now_ms: int) -> int:
        """Unlist the stream's windows past `bypass_retention_ms` (tombstones on `bypassed`);
        return how many."""
        stream_id = live.config.stream_id
        oldest = self._oldest.get(stream_id)
        retention_ms = live.config.bypass_retention_ms
        if oldest is None or oldest + retention_ms > now_ms:
            return 0
        state = self._load(stream_id)
        if state is None:
            self._oldest.pop(stream_id, None)
            return 0
        expired = expire_bypasses(state, retention_ms, now_ms)
        for start_ms in expired:
            self.emitter.send(self.topics.bypassed, bypassed_key(stream_id, start_ms), None)
        self._save(state)
        if self.metrics is not None and expired:
            self.metrics.bypasses_expired(len(expired))
        self.stats["bypasses_expired"] += len(expired)
        return len(expired)

    def request(
        self, live: StreamState, replay: Replay, now_ms: int, partition: int = 0
    ) -> str | None:
        """Start a replay; return a rejection reason, or None."""
        state = self._load(replay.stream_id)
        if state is None:
            return f"no bypassed window of {replay.stream_id!r} is listed"
        before = replay_flights(state)
        decision = lane.request(state, live, replay.from_ms, replay.to_ms, self.concurrency,
                                now_ms, self._gate(live))  # fmt: skip
        if decision.rejected is None:
            self.stats["replays_requested"] += 1
            self._emit(state, live, decision, now_ms)
            self._counted(partition, live, before, state, now_ms)
        return decision.rejected

    def on_result(
        self,
        live: StreamState,
        result: Result,
        now_ms: int,
        announce_live: Callable[[], None],
        partition: int = 0,
    ) -> ReplayDecision | None:
        """Handle a result if it belongs to the replay lane (None: it is the live lane's).

        `announce_live` flushes the stream's live windows waiting to be announced: called
        before a replayed window whose bypass is among them is announced."""
        state = self._load(result.stream_id) if result.stream_id in self._busy else None
        if state is None or lane_of(state, result) == "live":
            return None
        before = replay_flights(state)
        decision = lane.on_result(state, live, result, self.concurrency, now_ms, self._gate(live))
        if decision is not None and decision.rejected is None and decision.ignored is None:
            if any(w.end_ms > live.announced_ms for w in decision.replayed):
                announce_live()
            self._emit(state, live, decision, now_ms)
            self._counted(partition, live, before, state, now_ms)
        return decision

    def advance(
        self, live: StreamState, now_ms: int, expire: bool = True, partition: int = 0
    ) -> None:
        """Time-driven work: the outbox settled, deadlines (unless `expire` is False: the
        takeover grace) and dispatches."""
        stream_id = live.config.stream_id
        if stream_id not in self._busy:
            return
        state = self._load(stream_id)
        if state is not None:
            settled = self.announcer.settle(state, live.announced_ms, now_ms)
            before = replay_flights(state)
            decision = lane.advance(state, live, self.concurrency, now_ms, expire,
                                    self._gate(live))  # fmt: skip
            if decision.tasks or decision.relisted:
                self._emit(state, live, decision, now_ms)
            elif settled:
                self._save(state)
            self._counted(partition, live, before, state, now_ms)

    def delete(self, stream_id: str, partition: int = 0, source: str | None = None) -> None:
        """Forget a deleted stream's bypassed windows, on `bypassed` too (tombstones), and its
        replays in flight (`source`: what admission counted them against)."""
        self._busy.discard(stream_id)
        self._oldest.pop(stream_id, None)
        self._waiting_ms.pop(stream_id, None)
        state = self._load(stream_id)
        if self.admission is not None and source is not None:
            self.admission.replay_waiting(partition, stream_id, source, 0, None)
            if state is not None and state.in_flight:
                self.admission.replayed(partition, source, replay_flights(state), None, 0)
        if state is None:
            return
        for window in state.listed:
            self.emitter.send(self.topics.bypassed, bypassed_key(stream_id, window.start_ms), None)
        self.store.delete(stream_id)

    def rebuild(self, owned: Callable[[str], bool]) -> list[str]:
        """Find busy replays of newly owned streams (their ids are returned) and when each
        one's oldest window was bypassed (an outbox left is announced again at the stream's
        first tick, which nothing watches yet)."""
        found = []
        for stream_id, raw in self.store.items():
            if not owned(stream_id):
                continue
            state = self._decode(stream_id, raw)
            if state is None:
                continue
            self._note_oldest(state)
            if state.busy:
                self._busy.add(stream_id)
                found.append(stream_id)
        return found

    def forget(self, owned: Callable[[str], bool]) -> None:
        self._busy = {s for s in self._busy if not owned(s)}
        self.announcer.forget(owned)
        self._oldest = {s: at for s, at in self._oldest.items() if not owned(s)}

    def reset(self) -> None:
        """Forget what is in memory; `rebuild` finds it again from the store."""
        self._busy = set()
        self._waiting_ms = {}
        self.announcer.reset()
        self._oldest = {}

    def _gate(self, live: StreamState) -> _Asked | None:
        """The gate for one decision of the stream's lane (None: nothing is gated)."""
        if self.admission is None or live.config.source is None:
            self._asked = None
        else:
            since_ms = self._waiting_ms.get(live.config.stream_id)
            self._asked = _Asked(self.admission, since_ms)
        return self._asked

    def _counted(self, partition: int, live: StreamState, before: dict[int, int],
                 state: ReplayState, now_ms: int) -> None:  # fmt: skip
        """Tell admission what the decision dispatched, what was answered and what waits."""
        source = live.config.source
        asked, self._asked = self._asked, None
        if self.admission is None or source is None or asked is None:
            return
        self.admission.replayed(partition, source, before, state, now_ms)
        stream_id = live.config.stream_id
        if asked.denied:
            self._waiting_ms.setdefault(stream_id, now_ms)
        else:
            self._waiting_ms.pop(stream_id, None)
        self.admission.replay_waiting(partition, stream_id, source, asked.denied, asked.first)

    def _emit(
        self, state: ReplayState, live: StreamState, decision: ReplayDecision, now_ms: int
    ) -> None:
        stream_id = state.stream_id
        key = stream_id.encode()
        for task in decision.tasks:
            self.emitter.send(self.topics.tasks_for(task.pipeline), key, encode_task(task))
        for record in decision.relisted:
            self.emitter.send(self.topics.bypassed, bypassed_key(stream_id, record.start_ms),
                              encode_bypassed(record))  # fmt: skip
        if decision.replayed:
            self.announcer.replayed(state, decision.replayed, live.announced_ms, now_ms)
        if self.metrics is not None:
            self.metrics.replayed(
                len(decision.tasks), 1 if decision.replayed else 0, live.config.pipeline
            )
        self.stats["replay_tasks"] += len(decision.tasks)
        self.stats["replayed"] += len(decision.replayed)
        self.stats["replay_failures"] += len(decision.relisted)
        self._save(state)

    def _save(self, state: ReplayState) -> None:
        if state.busy:
            self._busy.add(state.stream_id)
        else:
            self._busy.discard(state.stream_id)
        self._note_oldest(state)
        if state.listed or state.announcing:
            self.store.set(state.stream_id, orjson.dumps(lane.replay_to_dict(state)))
        elif self.store.get(state.stream_id) is not None:
            self.store.delete(state.stream_id)

    def _note_oldest(self, state: ReplayState) -> None:
        oldest = oldest_bypass_ms(state)
        if oldest is None:
            self._oldest.pop(state.stream_id, None)
        else:
            self._oldest[state.stream_id] = oldest

    def _load(self, stream_id: str) -> ReplayState | None:
        raw = self.store.get(stream_id)
        return None if raw is None else self._decode(stream_id, raw)

    @staticmethod
    def _decode(stream_id: str, raw: bytes) -> ReplayState | None:
        try:
            return lane.replay_from_dict(orjson.loads(raw))
        except (ValueError, InvalidInput) as exc:
            log.error("unreadable replay state for %r, left alone: %s", stream_id, exc)
            return None


class ReplayAnnouncer:
    """How replayed windows go out: each window's tombstone on `bypassed` (it is no longer
    bypassed) and one commit of reason "replayed" at `mark_ms` (the stream's last announced
    mark, which a replay never moves: previous_ms == downstream_ms == it, so the chain on
    `commits` goes on). Sent once: the Kafka transaction's way, whose outputs commit with the
    state. An at-least-once delivery watches them (faust.outbox.OutboxReplayAnnouncer)."""

    def __init__(self, topics: Topics, emitter: Emitter) -> None:
        self.topics = topics
        self.emitter = emitter

    def replayed(
        self, state: ReplayState, windows: Iterable[CommittedWindow], mark_ms: int, now_ms: int
    ) -> None:
        """Announce windows whose replay the core just finished."""
        self.send(state.stream_id, tuple(windows), mark_ms, now_ms)

    def settle(self, state: ReplayState, mark_ms: int, now_ms: int) -> bool:
        """Time-driven work on what was announced; return whether `state` changed."""
        return False

    def forget(self, owned: Callable[[str], bool]) -> None:
        """Forget the streams of partitions given up (`owned` says which)."""

    def reset(self) -> None:
        """Forget everything in memory."""

    def send(
        self,
        stream_id: str,
        windows: tuple[CommittedWindow, ...],
        mark_ms: int,
        now_ms: int,
        watch: Callable[[tuple[CommittedWindow, ...]], Watch] | None = None,
    ) -> None:
        """The tombstones and the commit; `watch(windows)` gives each message's delivery
        callbacks (the tombstone's: its window alone)."""
        send = self.emitter.send
        for window in windows:
            tombstone = bypassed_key(stream_id, window.start_ms)
            send(self.topics.bypassed, tombstone, None, *(watch((window,)) if watch else ()))
        commit = encode_commit(Commit(stream_id, mark_ms, mark_ms, now_ms, windows))
        send(self.topics.commits, stream_id.encode(), commit, *(watch(windows) if watch else ()))


class _Asked:
    """Admission as one decision of a stream's replay lane asks it (streams.core.gate): counts
    the windows denied, and the place of the first in its source's queue (since when the
    stream's replays wait: `since_ms`, now if they did not)."""

    __slots__ = ("_admission", "_since_ms", "denied", "first")

    def __init__(self, admission: Admission, since_ms: int | None) -> None:
        self._admission = admission
        self._since_ms = since_ms
        self.denied = 0
        self.first: tuple[int, int] | None = None

    def admit(
        self, state: StreamState, start_ms: int, end_ms: int, lane: Lane, now_ms: int
    ) -> bool:
        since_ms = now_ms if self._since_ms is None else self._since_ms
        if self._admission.admit_replay(state, end_ms, since_ms, now_ms):
            return True
        self.denied += 1
        if self.first is None:
            self.first = (since_ms, end_ms)
        return False
