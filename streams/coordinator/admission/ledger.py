"""What admission counts: each source's flights and waits on this coordinator, from decisions.

A window's class in flight is a function of the window alone (its end, and its `dispatched_ms`
as "now": what the gate classified it as when it admitted it), so nothing is kept per stream
for its flights: before a decision the stream's flights are read from its state as loaded
(`loaded`), after it from the state decided (`note`), and the difference is what the decision
answered (a flight gone: a success when its window was acked, a failure when it is due again
or was bypassed) and dispatched. Counts are kept per partition and source (`forget` drops a
revoked partition's), so a million streams in flight cost a few integers per partition.

Kept per stream only while it waits for admission, or stands by (a live stream of a capped
source between two windows: see streams.coordinator.admission), and, after a rebuild, until
its first decision (its flights were counted from its stored summary, as CATCHUP: the summary
has no classes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from streams.coordinator.admission.queue import Places, WaitQueue
from streams.core.admission import CATCHUP, REPLAY, Class, SourceGate, classify
from streams.core.model import StreamState
from streams.core.replay import ReplayState

Flight = tuple[int, int, Class]  # start_ms, attempt, class
Key = tuple[int, str]  # partition, source


@dataclass(slots=True)
class Wait:
    """A stream's windows waiting for admission, as counted: its source, partition, counts by
    class, and its places in the queue (streams.coordinator.admission.queue; None: it only
    stands by)."""

    source: str
    partition: int
    counts: tuple[int, int, int]
    places: Places | None


def flights(state: StreamState | None) -> tuple[Flight, ...]:
    """The stream's windows in flight, each with the class the gate admitted it as."""
    if state is None:
        return ()
    out = []
    config = state.config
    for w in state.windows:  # a loop, not a generator: most states hold one window
        if w.in_flight:
            live_ms = (w.dispatched_ms or 0) - config.delay_ms
            klass = classify(w.end_ms, live_ms, config.window_ms, "live")
            out.append((w.start_ms, w.attempt, klass))
    return tuple(out)


def replay_flights(state: ReplayState) -> dict[int, int]:
    """The replay lane's windows in flight: start_ms -> attempt."""
    return {w.start_ms: w.attempt for w in state.listed if w.attempt}


def succeeded(state: StreamState, start_ms: int) -> bool:
    """Whether the window that started at `start_ms` and left flight was a success: gone or
    finished by an ack (a partial ack moves its start: gone too), not due again or bypassed."""
    for window in state.windows:
        if window.start_ms == start_ms:
            if not window.finished:
                return False  # due again (a nack or a timeout), or sent again
            closed = window.closed
            return not closed or closed[-1].reason != "bypass"
    return True


def standing_by(state: StreamState, gate: SourceGate, now_ms: int) -> bool:
    """Whether a stream with nothing waiting stands by (streams.coordinator.admission.gates):
    its source is capped or rate-limited, nothing of it is in flight, and its next window is
    due within one `window_ms`."""
    if gate.limits.is_unlimited:
        return False
    window_ms = state.config.window_ms
    soon = False
    for window in state.windows:
        if window.in_flight:
            return False
        if not window.finished and window.due_ms - now_ms <= window_ms:
            soon = True
    return soon


def _uncount(gate: SourceGate, klass: Class, count: int = 1) -> None:
    """Flights that ended without an answer the pacer should learn from."""
    gate.in_flight[klass] = max(0, gate.in_flight[klass] - count)


class Ledger:
    """The counts behind each source's gate (see the module's docstring). `gate(source)`: the
    source's SourceGate (made on first use)."""

    def __init__(self, gate: Callable[[str], SourceGate]) -> None:
        self._gate = gate
        self._loaded: tuple[str, str | None, tuple[Flight, ...]] | None = None
        self._admitted: dict[str, dict[int, Class]] = {}  # in the decision under way
        self._flying: dict[Key, list[int]] = {}  # counted flights by class
        self.waits: dict[str, Wait] = {}
        self._waiting: dict[Key, int] = {}  # windows waiting (and streams standing by)
        self._rebuilt: dict[str, tuple[str, int, int]] = {}  # stream -> source, partition, n
        self._dispatched: dict[Key, int] = {}  # tasks dispatched (a counter)
        self.queue = WaitQueue()  # the waiting streams by class, first come first served
        # stream -> partition, source, windows and place of its replays waiting (REPLAY)
        self._replay_waits: dict[str, tuple[int, str, int, tuple[int, int] | None]] = {}
        self.freed: set[str] = set()  # sources whose flights ended since the last `take_freed`
        # Until the limits are known (set by Admission: streams.coordinator.admission.gates),
        # every gate denies, so a free one's waits count too.
        self.closed = True

    # -- a decision ------------------------------------------------------------------------

    def loaded(self, stream_id: str, state: StreamState | None) -> None:
        """The stream's state as loaded, before a decision."""
        stale = self._admitted.pop(stream_id, None)
        if stale and state is not None and state.config.source is not None:
            gate = self._gate(state.config.source)
            for klass in stale.values():  # a decision that raised: never applied
                _uncount(gate, klass)
        source = None if state is None or state.deleted_ms is not None else state.config.source
        self._loaded = (stream_id, source, flights(state) if source is not None else ())

    def admitted(self, stream_id: str, start_ms: int, klass: Class) -> None:
        """The gate admitted (and counted) a dispatch in the decision under way."""
        self._admitted.setdefault(stream_id, {})[start_ms] = klass

    def note(self, partition: int, stream_id: str, state: StreamState | None, now_ms: int) -> None:
        """The stream's state after a decision (None: gone)."""
        admitted = self._admitted.pop(stream_id, None)
        loaded = self._loaded
        if loaded is not None and loaded[0] == stream_id:
            _, old_source, before = loaded
        else:
            old_source, before = None, ()
        source = None if state is None or state.deleted_ms is not None else state.config.source
        rebuilt = self._rebuilt.pop(stream_id, None)
        if rebuilt is not None:  # counted as CATCHUP from its summary: count it as it is
            r_source, r_partition, n = rebuilt
            self._count(r_partition, r_source, CATCHUP, -n)
            if old_source is not None:
                for _, _, klass in before:
                    self._count(partition, old_source, klass, 1)
        after = flights(state) if source is not None else ()
        if source != old_source:
            for _, _, klass in before:
                self._end(partition, old_source, klass, None)
            before = ()
        if source is not None and state is not None and (before or after):
            kept = {(start, attempt) for start, attempt, _ in before}
            sent = {(start, attempt) for start, attempt, _ in after}
            for start, attempt, klass in before:
                if (start, attempt) not in sent:
                    self._end(partition, source, klass, succeeded(state, start))
            for start, attempt, klass in after:
                if (start, attempt) in kept:
                    continue
                if admitted is not None and start in admitted:
                    del admitted[start]
                    self._tally(partition, source, klass, 1)  # the gate counted it
                    key = (partition, source)
                    self._dispatched[key] = self._dispatched.get(key, 0) + 1
                else:
                    self._count(partition, source, klass, 1)  # sent without this gate
        if admitted and state is not None and state.config.source is not None:
            gate = self._gate(state.config.source)
            for klass in admitted.values():  # admitted, yet not in flight
                _uncount(gate, klass)
        self._note_waits(partition, stream_id, state if source is not None else None,
                         now_ms)  # fmt: skip
        self._loaded = (stream_id, source, after)

    def replayed(self, partition: int, source: str, before: dict[int, int],
                 state: ReplayState | None) -> None:  # fmt: skip
        """A decision of the stream's replay lane: `before`, its flights as loaded
        (`replay_flights`); `state` as decided (None: gone, with its flights unanswered). A
        flight gone was answered: a success when its window is no longer listed (replayed)."""
        after = {} if state is None else replay_flights(state)
        for start_ms, attempt in before.items():
            if after.get(start_ms) != attempt:
                if state is None:
                    self._end(partition, source, REPLAY, None)
                else:
                    listed = any(w.start_ms == start_ms for w in state.listed)
                    self._end(partition, source, REPLAY, not listed)
        for start_ms, attempt in after.items():
            if before.get(start_ms) != attempt:
                self._tally(partition, source, REPLAY, 1)  # the gate counted it at its admit
                key = (partition, source)
                self._dispatched[key] = self._dispatched.get(key, 0) + 1

    def replays_rebuilt(self, partition: int, source: str, in_flight: int) -> None:
        """A rebuilt partition's stream with `in_flight` replays (its replay state)."""
        if in_flight:
            self._count(partition, source, REPLAY, in_flight)

    def rebuilt(self, partition: int, stream_id: str, source: str, in_flight: int) -> None:
        """A stream of a rebuilt partition, from its stored summary: `in_flight` windows of
        unknown class, counted as CATCHUP until its first decision."""
        self._rebuilt[stream_id] = (source, partition, in_flight)
        self._count(partition, source, CATCHUP, in_flight)

    # -- partitions ------------------------------------------------------------------------

    def forget(self, partitions: Iterable[int]) -> None:
        """Partitions gone (revoked, or to be rebuilt): their counts leave the gates."""
        gone = set(partitions)
        for key in [k for k in self._flying if k[0] in gone]:
            counts = self._flying.pop(key)
            gate = self._gate(key[1])
            for klass in (0, 1, 2):
                _uncount(gate, Class(klass), counts[klass])
        for stream_id in [s for s, w in self.waits.items() if w.partition in gone]:
            self._set_wait(stream_id, None)
        for stream_id in [s for s, r in self._replay_waits.items() if r[0] in gone]:
            del self._replay_waits[stream_id]
        for stream_id in [s for s, r in self._rebuilt.items() if r[1] in gone]:
            del self._rebuilt[stream_id]
        for key in [k for k in self._dispatched if k[0] in gone]:
            del self._dispatched[key]
        self._loaded = None

    def reset(self) -> None:
        """Every count goes (the engine rolled its store back; every partition is rebuilt)."""
        self.forget({k[0] for k in self._flying} | {w.partition for w in self.waits.values()})
        self._admitted.clear()
        self._rebuilt.clear()
        self._replay_waits.clear()

    def demand(self, partition: int, source: str) -> int:
        """In-flight plus waiting windows of `source` in `partition`, as counted here."""
        key = (partition, source)
        flying = self._flying.get(key)
        return (0 if flying is None else sum(flying)) + self._waiting.get(key, 0)

    def load(self, partition: int, source: str) -> tuple[int, int, int]:
        """(in flight, waiting, dispatched) of `source` in `partition`, as counted here."""
        key = (partition, source)
        flying = self._flying.get(key)
        return (
            0 if flying is None else sum(flying),
            self._waiting.get(key, 0),
            self._dispatched.get(key, 0),
        )

    def take_freed(self) -> set[str]:
        freed, self.freed = self.freed, set()
        return freed

    # -- the parts -------------------------------------------------------------------------

    def _tally(self, partition: int, source: str, klass: Class, delta: int) -> None:
        counts = self._flying.get((partition, source))
        if counts is None:
            counts = self._flying[(partition, source)] = [0, 0, 0]
        counts[klass] = max(0, counts[klass] + delta)
        if not (counts[0] or counts[1] or counts[2]):
            del self._flying[(partition, source)]

    def _count(self, partition: int, source: str, klass: Class, delta: int) -> None:
        """Flights counted (or, negative, uncounted) on the gate and here."""
        gate = self._gate(source)
        if delta > 0:
            gate.in_flight[klass] += delta
        else:
            _uncount(gate, klass, -delta)
        self._tally(partition, source, klass, delta)

    def _end(self, partition: int, source: str | None, klass: Class, ok: bool | None) -> None:
        """A flight ended: answered (`ok`: whether a success), or gone unanswered (None)."""
        if source is None:
            return
        gate = self._gate(source)
        if ok is None:
            _uncount(gate, klass)
        else:
            gate.answered(klass, ok)
        self._tally(partition, source, klass, -1)
        self.freed.add(source)

    def _note_waits(
        self,
        partition: int,
        stream_id: str,
        state: StreamState | None,
        now_ms: int,
    ) -> None:
        source = None if state is None else state.config.source
        if state is None or source is None:
            self._set_wait(stream_id, None)
            return
        gate = self._gate(source)
        if (
            gate.limits.is_unlimited
            and not self.closed
            and not gate.pacer.active
            and stream_id not in self.waits
            and source not in self.queue.sources()
        ):
            return  # a free gate with no queue denies nothing (the common case: skip the windows)
        config = state.config
        now_live = now_ms - config.delay_ms
        counts = [0, 0, 0]
        places: list[tuple[int, int] | None] = [None, None, None]
        for window in state.windows:
            since_ms = window.waiting_since_ms
            if since_ms is not None and not window.in_flight:
                klass = classify(window.end_ms, now_live, config.window_ms, "live")
                counts[klass] += 1
                place = places[klass]
                if place is None or (since_ms, window.end_ms) < place:
                    places[klass] = (since_ms, window.end_ms)
        replay = self._replay_waits.get(stream_id)
        if replay is not None and replay[1] == source:  # the REPLAY class: its replay lane's
            counts[2], places[2] = replay[2], replay[3]
        waiting = bool(counts[0] or counts[1] or counts[2])
        if not waiting and standing_by(state, gate, now_ms):
            counts[0] = 1  # standing by: its next window is due soon, as LIVE
        if not (counts[0] or counts[1] or counts[2]):
            self._set_wait(stream_id, None)
        else:
            waits = (counts[0], counts[1], counts[2])
            queued = (places[0], places[1], places[2]) if waiting else None
            self._set_wait(stream_id, Wait(source, partition, waits, queued))

    def replay_waiting(self, partition: int, stream_id: str, source: str, count: int,
                       place: tuple[int, int] | None) -> None:  # fmt: skip
        """After a decision of the stream's replay lane: `count` replay windows wait for
        admission, the first at `place` (streams.coordinator.admission.queue), as REPLAY."""
        if count:
            self._replay_waits[stream_id] = (partition, source, count, place)
        else:
            self._replay_waits.pop(stream_id, None)
        old = self.waits.get(stream_id)
        if old is None or old.source != source:
            live_counts: tuple[int, int] = (0, 0)
            live_places: tuple[tuple[int, int] | None, ...] = (None, None)
        else:
            live_counts = (old.counts[0], old.counts[1])
            live_places = (None, None) if old.places is None else old.places[:2]
        counts = (live_counts[0], live_counts[1], count)
        if not (counts[0] or counts[1] or counts[2]):
            self._set_wait(stream_id, None)
            return
        queued = (live_places[0], live_places[1], place if count else None)
        places = None if queued == (None, None, None) else queued
        self._set_wait(stream_id, Wait(source, partition, counts, places))

    def drop_wait(self, stream_id: str) -> None:
        """The stream's decision failed: it leaves the queue (a stream that raises at each
        decision must not hold its class back; its retry asks the gate again)."""
        self._replay_waits.pop(stream_id, None)
        self._set_wait(stream_id, None)

    def _set_wait(self, stream_id: str, wait: Wait | None) -> None:
        old = self.waits.get(stream_id)
        if old == wait:
            return
        if old is not None:
            self._apply_wait(old, -1)
            if old.places is not None and (wait is None or wait.places is None or
                                           wait.source != old.source):  # fmt: skip
                self.queue.drop(old.source, stream_id)
        if wait is None:
            self.waits.pop(stream_id, None)
        else:
            self.waits[stream_id] = wait
            self._apply_wait(wait, 1)
            if wait.places is not None:
                self.queue.put(wait.source, stream_id, wait.places)

    def _apply_wait(self, wait: Wait, sign: int) -> None:
        gate = self._gate(wait.source)
        for klass in (0, 1, 2):
            if wait.counts[klass]:
                gate.waiting(Class(klass), sign * wait.counts[klass])
        key = (wait.partition, wait.source)
        total = self._waiting.get(key, 0) + sign * sum(wait.counts)
        if total > 0:
            self._waiting[key] = total
        else:
            self._waiting.pop(key, None)
