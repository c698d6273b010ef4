"""The coordinator's admission: the core's gate (streams.core.gate) over one SourceGate per source
(streams.core.admission), with the counting, parking and waking that only the coordinator can do.

The rules are the core's; this module counts and wakes:

- **Counting.** After every decision of a stream (`note`, beside the outage guard's), the
  stream's windows say what it has in flight and what waits for admission: a window that left
  flight since was answered (a success when it was acked, a failure when it is due again or
  was bypassed), which frees its slot and feeds the pacer. A rebuilt partition's streams count
  from their stored summaries (`note_rebuilt`: their flights as CATCHUP, until their next
  decision says which class each is), so a restart does not forget what is in flight.
- **Standing by.** A stream of a capped source with nothing in flight or waiting, whose next
  window is due within one `window_ms` (a live stream between two windows), counts as a LIVE
  window waiting, though it is not woken: the backfill beyond its floor is admitted only while
  every live stream would still find a slot (the gate's "room > LIVE waiting"). Without this,
  backfill admitted between two live windows held the slots the next ones needed (the gate
  preempts nothing), and live windows waited for backfill tasks to be answered.
- **Parking.** A stream whose window the gate denies is not ticked again and again: its due
  time leaves its waiting windows out (`next_due_ms(..., parked=True)`), and it is woken
  (`pump`) when its source has room: after an answer of that source, when a token is due, and
  at every health tick (once a second) as a floor. Waiters are woken in the gate's order: LIVE,
  then CATCHUP, then REPLAY, and within a class the oldest window end first (the most behind
  first: see streams.core.admission.gate).
- **Shares.** At each health tick, each capped source's demand per partition is read from the
  `health` view (every coordinator's published in-flight plus waiting windows of the source),
  allocated (streams.core.admission.share, the same for every coordinator), and this
  coordinator's share set on its gate. Until a second view agrees a share is 0 (a rise waits for
  two views), so a capped source dispatches nothing for about two publishes after a start.
- **Paced recovery.** When a source leaves outage, and when partitions are rebuilt with windows
  due (a restart with a backlog), the source's gate starts a slow start
  (streams.core.admission.pacing).

The replay lane is not gated: replays keep their own concurrency per stream
(`replay_concurrency`), and are not counted against a source's limits.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from streams.core.admission import CATCHUP, Class, Shares, SourceGate, SourceLimits, classify
from streams.core.lanes import Lane
from streams.core.model import StreamState, Window

log = logging.getLogger("streams.coordinator")

# How often a source with waiters is woken even when no answer freed room: a floor on liveness
# (a parked stream is asked again within this), not the usual path.
PUMP_FLOOR_MS = 1_000


@dataclass(slots=True)
class _Tracked:
    """What this coordinator counts of one stream: its source, partition, windows in flight by
    start (their class), and its waiting windows' counts by class."""

    source: str
    partition: int
    flying: dict[int, Class] = field(default_factory=dict)
    rebuilt: int = 0  # flights counted from a summary (as CATCHUP) until its next decision
    waits: tuple[int, int, int] = (0, 0, 0)
    first_wait: tuple[int, int] | None = None  # (class, end_ms) of its first waiting window


class Admission:
    """Implements streams.core.gate.Gate for the coordinator (see the module's docstring).

    `limits`: each source's limits as set (streams.core.admission.limits; a source absent is
    unlimited); `wake(partition, stream_id, at_ms)`: put a stream on the due index.
    """

    def __init__(
        self,
        limits: Callable[[], Mapping[str, SourceLimits]],
        wake: Callable[[int, str, int], None],
    ) -> None:
        self._limits_of = limits
        self._wake = wake
        self.gates: dict[str, SourceGate] = {}
        self._shares: dict[str, Shares] = {}
        self._streams: dict[str, _Tracked] = {}
        self._admitted: dict[str, dict[int, Class]] = {}  # in the decision under way
        self._waiters: dict[str, dict[str, tuple[int, int]]] = {}  # source -> stream -> key
        self._demand: dict[tuple[int, str], int] = {}  # (partition, source) -> demand
        self._pump_ms: dict[str, int] = {}  # source -> when to wake its waiters
        self._floor_ms = 0
        self.dispatched: dict[str, int] = {}  # source -> dispatches admitted (a counter)

    # -- the core's gate -------------------------------------------------------------------

    def admit(
        self, state: StreamState, start_ms: int, end_ms: int, lane: Lane, now_ms: int
    ) -> bool:
        config = state.config
        source = config.source
        if source is None:
            return True
        gate = self.gates.get(source) or self._gate(source, now_ms)
        klass = classify(end_ms, now_ms - config.delay_ms, config.window_ms, lane)
        if not gate.admit(klass, now_ms):
            return False
        self._admitted.setdefault(config.stream_id, {})[start_ms] = klass
        self.dispatched[source] = self.dispatched.get(source, 0) + 1
        return True

    # -- counting --------------------------------------------------------------------------

    def note(self, partition: int, stream_id: str, state: StreamState | None, now_ms: int) -> None:
        """The stream's state after a decision (None: gone)."""
        admitted = self._admitted.pop(stream_id, None)
        old = self._streams.get(stream_id)
        source = None if state is None or state.deleted_ms is not None else state.config.source
        if old is not None and old.source != source:
            self._drop(stream_id, old)
            old = None
        if source is None or state is None:
            if admitted:
                self._unadmit(state, admitted)
            return
        gate = self.gates.get(source) or self._gate(source, now_ms)
        if old is None:
            old = _Tracked(source, partition)
        config = state.config
        now_live = now_ms - config.delay_ms
        flying: dict[int, Class] = {}
        waits = [0, 0, 0]
        first: tuple[int, int] | None = None
        soon = False
        previous = old.flying
        answered = dict(previous)
        for window in state.windows:
            start = window.start_ms
            if window.in_flight:
                klass = None if admitted is None else admitted.pop(start, None)
                if klass is None:  # the same flight as before, or one this gate did not admit
                    klass = answered.pop(start, None)
                    if klass is None:  # in flight without this gate (a rebuild): count it now
                        klass = self._class(state, window, now_live)
                        gate.in_flight[klass] += 1
                elif start in answered:  # sent again in this decision: the last one failed
                    gate.answered(answered.pop(start), False)
                flying[start] = klass
            elif window.waiting_since_ms is not None and not window.finished:
                klass = self._class(state, window, now_live)
                waits[klass] += 1
                if first is None or (klass, window.end_ms) < first:
                    first = (klass, window.end_ms)
            elif not window.finished and window.due_ms - now_ms <= config.window_ms:
                soon = True
        if soon and not flying and first is None and not gate.limits.is_unlimited:
            waits[0] = 1  # standing by: its next window is due within one, as LIVE
        for start, klass in answered.items():
            gate.answered(klass, _succeeded(state, start))
        if len(answered) or len(flying) < len(previous):
            self._pump_ms[source] = now_ms  # room was freed
        if admitted:  # admitted, yet not in flight (the decision was not applied)
            for klass in admitted.values():
                _uncount(gate, klass)
        if old.rebuilt:
            for _ in range(old.rebuilt):
                _uncount(gate, CATCHUP)
            old.rebuilt = 0
        demand_before = len(previous) + sum(old.waits)
        old.flying = flying
        self._set_waits(stream_id, old, gate, (waits[0], waits[1], waits[2]), first)
        self._add_demand(partition, source, len(flying) + sum(waits) - demand_before)
        # Only a stream with something in flight or waiting is kept: a million idle streams
        # cost nothing here.
        if flying or waits[0] or waits[1] or waits[2]:
            self._streams[stream_id] = old
        else:
            self._streams.pop(stream_id, None)

    def note_rebuilt(self, partition: int, stream_id: str, source: str | None, in_flight: int,
                     now_ms: int) -> None:  # fmt: skip
        """A stream of a rebuilt partition, from its stored summary: its flights count (as
        CATCHUP) until its next decision replaces them with what its windows say."""
        old = self._streams.pop(stream_id, None)
        if old is not None:
            self._drop(stream_id, old)
        if source is None or not in_flight:
            return
        gate = self.gates.get(source) or self._gate(source, now_ms)
        self._streams[stream_id] = _Tracked(source, partition, rebuilt=in_flight)
        gate.in_flight[CATCHUP] += in_flight
        self._add_demand(partition, source, in_flight)

    def forget(self, partitions: Iterable[int]) -> None:
        """Partitions gone (revoked, or to be rebuilt after an abort): their streams' counts go."""
        gone = set(partitions)
        for stream_id, tracked in list(self._streams.items()):
            if tracked.partition in gone:
                self._drop(stream_id, tracked)

    def reset(self) -> None:
        """The engine rolled its store back: every count goes (partitions are rebuilt)."""
        for stream_id, tracked in list(self._streams.items()):
            self._drop(stream_id, tracked)
        self._admitted.clear()

    def recover(self, backlogs: Mapping[str, int], now_ms: int) -> None:
        """These sources left outage, or were rebuilt with windows due (a restart with a
        backlog): pace their release. `backlogs`: per source, the windows it releases."""
        for source, backlog in backlogs.items():
            gate = self.gates.get(source) or self._gate(source, now_ms)
            gate.start_recovery(now_ms, backlog)
            if gate.pacer.active:
                log.info("source %r: pacing the release of %d windows from %d at once",
                         source, backlog, gate.pacer.limit() or 0)  # fmt: skip

    # -- waking ----------------------------------------------------------------------------

    def pump(self, now_ms: int) -> None:
        """Wake the waiters of every source that may admit one now, best first."""
        if now_ms >= self._floor_ms:
            self._floor_ms = now_ms + PUMP_FLOOR_MS
            for source in self._waiters:
                self._pump_ms.setdefault(source, now_ms)
        if not self._pump_ms:
            return
        due = [s for s, at_ms in self._pump_ms.items() if at_ms <= now_ms]
        for source in due:
            del self._pump_ms[source]
            waiters = self._waiters.get(source)
            if not waiters:
                continue
            gate = self.gates[source]
            cap = gate.cap()
            room = len(waiters) if cap is None else cap - sum(gate.in_flight)
            if room <= 0:
                continue  # an answer pumps it again
            wake_ms = gate.wake_ms(now_ms)
            at_ms = now_ms if wake_ms is None else max(now_ms, wake_ms)
            if at_ms > now_ms:
                self._pump_ms[source] = at_ms  # a token arrives then
                continue
            best = heapq.nsmallest(room, waiters.items(), key=lambda item: item[1])
            for stream_id, _ in best:
                tracked = self._streams.get(stream_id)
                if tracked is not None:
                    self._wake(tracked.partition, stream_id, now_ms)

    # -- shares ----------------------------------------------------------------------------

    def refresh(
        self, now_ms: int, demands: Mapping[str, Mapping[int, int]], owned: set[int]
    ) -> None:
        """A new `health` view: each capped source's demand per partition (every partition's
        published entry); sets this coordinator's share of each, and takes new limits."""
        limits = self._limits_of()
        for source, gate in list(self.gates.items()):
            wanted = limits.get(source) or SourceLimits.unlimited(source)
            if wanted != gate.limits:
                self._replace(source, gate, wanted, now_ms)
        for source, gate in self.gates.items():
            cap = gate.limits.max_in_flight
            if cap is None:
                self._shares.pop(source, None)
                continue
            shares = self._shares.get(source)
            if shares is None or shares.limit != cap:
                shares = self._shares[source] = Shares(cap)
            shares.update(demands.get(source, {}))
            share = shares.grant(owned)
            if share != gate.share:
                gate.set_share(share)
                self._pump_ms[source] = now_ms

    def demand(self, partition: int, source: str) -> int:
        """This coordinator's in-flight plus waiting windows of `source` in `partition`."""
        return self._demand.get((partition, source), 0)

    # -- the parts -------------------------------------------------------------------------

    def _gate(self, source: str, now_ms: int) -> SourceGate:
        limits = self._limits_of().get(source) or SourceLimits.unlimited(source)
        gate = self.gates[source] = self._new_gate(limits, now_ms)
        return gate

    @staticmethod
    def _new_gate(limits: SourceLimits, now_ms: int) -> SourceGate:
        """A gate whose share of a cap is 0 until the `health` views grant one (`refresh`):
        a coordinator that starts, or learns of a cap, must not take the whole of it while
        others may hold theirs (two coordinators would hold twice the cap for a publish)."""
        gate = SourceGate(limits, now_ms)
        if limits.max_in_flight is not None:
            gate.set_share(0)
        return gate

    def _replace(self, source: str, old: SourceGate, limits: SourceLimits, now_ms: int) -> None:
        """New limits for a source: a new gate that keeps the counts (and a recovery under way)."""
        gate = self.gates[source] = self._new_gate(limits, now_ms)
        gate.in_flight[:] = old.in_flight
        gate.waiting_counts[:] = old.waiting_counts
        if old.pacer.active:
            gate.start_recovery(now_ms)
            if gate.pacer.active:  # on from where it stood
                gate.pacer.level = old.pacer.level
                gate.pacer.threshold = old.pacer.threshold
                gate.pacer.settle(gate.demand())
        self._shares.pop(source, None)
        self._pump_ms[source] = now_ms
        log.info("source %r limits now %s", source, limits)

    def _class(self, state: StreamState, window: Window, now_live_ms: int) -> Class:
        return classify(window.end_ms, now_live_ms, state.config.window_ms, "live")

    def _set_waits(
        self,
        stream_id: str,
        tracked: _Tracked,
        gate: SourceGate,
        waits: tuple[int, int, int],
        first: tuple[int, int] | None,
    ) -> None:
        old = tracked.waits
        if old != waits:
            for klass in (0, 1, 2):
                if waits[klass] != old[klass]:
                    gate.waiting(Class(klass), waits[klass] - old[klass])
            tracked.waits = waits
        if first != tracked.first_wait:
            tracked.first_wait = first
            waiters = self._waiters.setdefault(tracked.source, {})
            if first is None:
                waiters.pop(stream_id, None)
                if not waiters:
                    del self._waiters[tracked.source]
            else:
                waiters[stream_id] = first

    def _drop(self, stream_id: str, tracked: _Tracked) -> None:
        """Stop counting a stream (deleted, gone to another owner, or of another source now)."""
        self._streams.pop(stream_id, None)
        gate = self.gates.get(tracked.source)
        if gate is None:
            return
        demand = len(tracked.flying) + tracked.rebuilt + sum(tracked.waits)
        for klass in tracked.flying.values():
            _uncount(gate, klass)
        for _ in range(tracked.rebuilt):
            _uncount(gate, CATCHUP)
        self._set_waits(stream_id, tracked, gate, (0, 0, 0), None)
        self._add_demand(tracked.partition, tracked.source, -demand)

    def _unadmit(self, state: StreamState | None, admitted: dict[int, Class]) -> None:
        source = None if state is None else state.config.source
        gate = None if source is None else self.gates.get(source)
        if gate is not None:
            for klass in admitted.values():
                _uncount(gate, klass)

    def _add_demand(self, partition: int, source: str, delta: int) -> None:
        if not delta:
            return
        key = (partition, source)
        value = self._demand.get(key, 0) + delta
        if value > 0:
            self._demand[key] = value
        else:
            self._demand.pop(key, None)


def _uncount(gate: SourceGate, klass: Class) -> None:
    """A flight that ended without an answer the pacer should learn from."""
    if gate.in_flight[klass] > 0:
        gate.in_flight[klass] -= 1


def _succeeded(state: StreamState, start_ms: int) -> bool:
    """Whether the window that started at `start_ms` and left flight was a success: gone or
    finished by an ack (a partial ack moves its start: gone too), not due again or bypassed."""
    for window in state.windows:
        if window.start_ms == start_ms:
            if not window.finished:
                return False  # due again: a nack or a timeout
            closed = window.closed
            return not closed or closed[-1].reason != "bypass"
    return True
