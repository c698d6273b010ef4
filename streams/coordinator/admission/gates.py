"""The coordinator's admission: the core's gate (streams.core.gate) over one SourceGate per source
(streams.core.admission), with the counting, parking and waking that only the coordinator can do.

The rules are the core's; this module counts and wakes:

- **Counting** (streams.coordinator.admission.ledger). Each decision's answers and dispatches
  are the difference between the stream's flights as loaded and as decided: a flight gone was
  answered (a success when its window was acked, a failure when it is due again or was
  bypassed), which frees its slot and feeds the pacer. A rebuilt partition's streams count from
  their stored summaries, so a restart does not forget what is in flight. A stream moved to
  another source takes its tasks in flight with it.
- **Standing by.** A stream of a capped source with nothing in flight or waiting, whose next
  window is due within one `window_ms` (a live stream between two windows), counts as a LIVE
  window waiting, though it is not woken: the backfill beyond its floor is admitted only while
  every live stream would still find a slot (the gate's "room > LIVE waiting"). Without this,
  backfill admitted between two live windows held the slots the next ones needed (the gate
  preempts nothing), and live windows waited for backfill tasks to be answered.
- **Parking.** A stream whose window the gate denies is not ticked again and again: its due
  time leaves its waiting windows out (`next_due_ms(..., parked=True)`), and it is woken
  (`pump`) when its source has room: after an answer of that source, when a token is due, and
  at every health tick (once a second) as a floor. Within a class, first come, first served:
  the window that began to wait first goes first (round robin over the waiting streams: see
  streams.coordinator.admission.queue), and this holds for every dispatch, not only the woken
  ones: a window is denied while another stream waits ahead of it in its class, so that a
  stream decided often (at each of its answers) cannot take the room freed for one woken only
  by the pump.
- **Shares.** At each health tick, each capped source's demand per partition is read from the
  `health` view (every coordinator's published in-flight plus waiting windows of the source),
  allocated (streams.core.admission.share, the same for every coordinator), and this
  coordinator's share set on its gate. Until a second view agrees a share is 0 (a rise waits for
  two views), so a capped source dispatches nothing for about two publishes after a start.
- **Limits not known yet.** Until the `sources` view is read (`limits` answers None: a start,
  streams.coordinator.limits_table), no window of a source is admitted: it waits, as for a full
  source, and is woken once they are known. Read as unlimited, a starting coordinator would
  have dispatched past a cap for as long as the read took.
- **Paced recovery.** When a source leaves outage, and when partitions are rebuilt with windows
  due (a restart with a backlog), the source's gate starts a slow start
  (streams.core.admission.pacing).

The replay lane is gated too, as REPLAY, the last class: its windows count against the source's
limits (streams.coordinator.replays counts them, and says how many wait), queue and are woken as
the live lane's are, and keep their own concurrency per stream (`replay_concurrency`) as well.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from streams.coordinator.admission.ledger import Ledger
from streams.core.admission import (
    CATCHUP,
    LIVE,
    REPLAY,
    Class,
    Shares,
    SourceGate,
    SourceLimits,
    classify,
)
from streams.core.lanes import Lane
from streams.core.model import StreamState
from streams.core.replay import ReplayState

log = logging.getLogger("streams.coordinator")

_CLASSES = (LIVE, CATCHUP, REPLAY)

# How often a source with waiters is woken even when no answer freed room: a floor on liveness
# (a parked stream is asked again within this), not the usual path.
PUMP_FLOOR_MS = 1_000


class Admission:
    """Implements streams.core.gate.Gate for the coordinator (see the module's docstring).

    `limits`: each source's limits as set (streams.core.admission.limits; a source absent is
    unlimited; None while not known yet); `wake(partition, stream_id, at_ms)`: put a stream on
    the due index.
    """

    def __init__(
        self,
        limits: Callable[[], Mapping[str, SourceLimits] | None],
        wake: Callable[[int, str, int], None],
    ) -> None:
        self._limits_of = limits
        self._wake = wake
        self.gates: dict[str, SourceGate] = {}
        self._shares: dict[str, Shares] = {}
        self.ledger = Ledger(self._gate_of)
        self._pump_ms: dict[str, int] = {}  # source -> when to wake its waiters
        # (stream, class) woken by the pump, not decided since: see `pump`
        self._invited: set[tuple[str, Class]] = set()
        self._floor_ms = 0
        self._now_ms = 0  # of the last call that gave one (a gate made by the ledger)
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
        self._now_ms = now_ms
        if self.ledger.closed and not self._known(now_ms):
            return False  # it waits, woken once they are known
        klass = classify(end_ms, now_ms - config.delay_ms, config.window_ms, lane)
        if lane == "replay":
            return self.admit_replay(state, end_ms, now_ms, now_ms)
        stream_id = config.stream_id
        if source in self.ledger.queue.sources() and self._queued(
            source, klass, _place(state, start_ms, end_ms, now_ms), stream_id, now_ms
        ):
            return False
        if not gate.admit(klass, now_ms):
            return False
        self.ledger.admitted(stream_id, start_ms, klass)
        self.dispatched[source] = self.dispatched.get(source, 0) + 1
        return True

    def admit_replay(self, state: StreamState, end_ms: int, since_ms: int, now_ms: int) -> bool:
        """The replay lane's dispatch of a window ending at `end_ms`, whose stream's replays
        wait since `since_ms`: REPLAY, the last class (its lane counts its own flights:
        `replayed`)."""
        source = state.config.source
        if source is None:
            return True
        gate = self.gates.get(source) or self._gate(source, now_ms)
        self._now_ms = now_ms
        if self.ledger.closed and not self._known(now_ms):
            return False
        place = (since_ms, end_ms)
        if self._queued(source, REPLAY, place, state.config.stream_id, now_ms):
            return False
        if not gate.admit(REPLAY, now_ms):
            return False
        self.dispatched[source] = self.dispatched.get(source, 0) + 1
        return True

    def _queued(
        self, source: str, klass: Class, place: tuple[int, int], stream_id: str, now_ms: int
    ) -> bool:
        """Whether the window waits behind another stream in its class (the queue)."""
        queue = self.ledger.queue
        if source not in queue.sources():
            return False
        invited = self._invited
        if (stream_id, klass) in invited:
            invited.discard((stream_id, klass))  # one window skips the queue, not the others
            return False
        if queue.ahead(source, klass, place, stream_id):
            self._pump_ms[source] = now_ms  # the slot, if any, is theirs: wake them
            return True
        return False

    # -- counting (streams.coordinator.admission.ledger) ---------------------------------

    def loaded(self, stream_id: str, state: StreamState | None) -> None:
        """The stream's state as loaded, before a decision."""
        self.ledger.loaded(stream_id, state)

    def note(self, partition: int, stream_id: str, state: StreamState | None, now_ms: int) -> None:
        """The stream's state after a decision (None: gone)."""
        self._now_ms = now_ms
        if self._invited:  # its wake is spent
            for klass in _CLASSES:
                self._invited.discard((stream_id, klass))
        ledger = self.ledger
        ledger.note(partition, stream_id, state, now_ms)
        if ledger.freed:
            for source in ledger.take_freed():
                self._pump_ms[source] = now_ms  # room was freed: wake its waiters

    def replayed(self, partition: int, source: str, before: dict[int, int],
                 state: ReplayState | None, now_ms: int) -> None:  # fmt: skip
        """A decision of a stream's replay lane (streams.coordinator.replays): its flights as
        loaded (`before`) and its state as decided (None: deleted)."""
        self._now_ms = now_ms
        ledger = self.ledger
        ledger.replayed(partition, source, before, state)
        if ledger.freed:
            for freed in ledger.take_freed():
                self._pump_ms[freed] = now_ms

    def replay_waiting(self, partition: int, stream_id: str, source: str, count: int,
                       place: tuple[int, int] | None) -> None:  # fmt: skip
        """After a decision of the stream's replay lane: how many of its replays wait, and the
        first one's place; the pump wakes it when REPLAY has room."""
        self.ledger.replay_waiting(partition, stream_id, source, count, place)

    def replays_rebuilt(self, partition: int, source: str, in_flight: int) -> None:
        """A rebuilt partition's stream with replays in flight."""
        self.ledger.replays_rebuilt(partition, source, in_flight)

    def note_rebuilt(self, partition: int, stream_id: str, source: str | None, in_flight: int,
                     now_ms: int) -> None:  # fmt: skip
        """A stream of a rebuilt partition, from its stored summary."""
        self._now_ms = now_ms
        if source is not None and in_flight:
            self.ledger.rebuilt(partition, stream_id, source, in_flight)

    def failed(self, stream_id: str) -> None:
        """A decision of the stream raised: it leaves the queue until it is decided again."""
        self.ledger.drop_wait(stream_id)

    def forget(self, partitions: Iterable[int]) -> None:
        """Partitions gone (revoked, or to be rebuilt after an abort): their counts go."""
        self.ledger.forget(partitions)
        self._invited.clear()  # a woken stream of a partition kept is woken again if need be

    def reset(self) -> None:
        """The engine rolled its store back: every count goes (partitions are rebuilt)."""
        self.ledger.reset()
        self._invited.clear()

    def recover(self, backlogs: Mapping[str, int], now_ms: int) -> None:
        """These sources left outage, or were rebuilt with windows due (a restart with a
        backlog): pace their release. `backlogs`: per source, the windows it releases."""
        for source, backlog in backlogs.items():
            gate = self._gate_of(source, now_ms)
            gate.start_recovery(now_ms, backlog)
            if gate.pacer.active:
                log.info("source %r: pacing the release of %d windows from %d at once",
                         source, backlog, gate.pacer.limit() or 0)  # fmt: skip

    # -- waking ----------------------------------------------------------------------------

    def pump(self, now_ms: int) -> None:
        """Wake the waiters of every source that may admit one now, best first."""
        if self.ledger.closed and not self._known(now_ms):
            return  # none would be admitted
        queue = self.ledger.queue
        if now_ms >= self._floor_ms:
            self._floor_ms = now_ms + PUMP_FLOOR_MS
            for source in queue.sources():
                self._pump_ms.setdefault(source, now_ms)
        if not self._pump_ms:
            return
        due = [s for s, at_ms in self._pump_ms.items() if at_ms <= now_ms]
        for source in due:
            del self._pump_ms[source]
            if source not in queue.sources():
                continue
            gate = self.gates[source]
            cap = gate.cap()
            room = None if cap is None else cap - sum(gate.in_flight)
            if room is not None and room <= 0:
                continue  # an answer pumps it again
            wake_ms = gate.wake_ms(now_ms)
            at_ms = now_ms if wake_ms is None else max(now_ms, wake_ms)
            if at_ms > now_ms:
                self._pump_ms[source] = at_ms  # a token arrives then
                continue
            # Per class, as many streams as the gate admits now (LIVE first, and the backfill's
            # floor: the gate's rules), the first in the queue. A woken stream is invited: the
            # first window its next decision asks for skips the queue (the streams ahead of it
            # were woken too, and may be decided after it: partitions tick in turn), and every
            # one woken finds its slot, whatever that order.
            waits = self.ledger.waits
            admitted = gate.admissible(queue.counts(source), now_ms)
            for klass in _CLASSES:
                if not admitted[klass]:
                    continue
                for stream_id in queue.best(source, klass, admitted[klass]):
                    self._invited.add((stream_id, klass))
                    self._wake(waits[stream_id].partition, stream_id, now_ms)

    # -- shares ----------------------------------------------------------------------------

    def refresh(
        self, now_ms: int, demands: Mapping[str, Mapping[int, int]], owned: set[int]
    ) -> None:
        """A new `health` view: each capped source's demand per partition (every partition's
        published entry); sets this coordinator's share of each, and takes new limits."""
        if self.ledger.closed and not self._known(now_ms):
            return  # nothing is admitted, no share is taken
        self._take(self._limits_of() or {}, now_ms)
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
        return self.ledger.demand(partition, source)

    def pacing(self) -> dict[str, int]:
        """The sources whose recovery is paced now, and the concurrency each allows."""
        return {s: level for s, g in self.gates.items() if (level := g.pacer.limit()) is not None}

    # -- the parts -------------------------------------------------------------------------

    def _known(self, now_ms: int) -> bool:
        """Whether the limits are known now; at the first time, what waited for them is woken
        and the gates made before (as unlimited) take them."""
        limits = self._limits_of()
        if limits is None:
            return False
        self.ledger.closed = False
        self._take(limits, now_ms)
        for source in self.ledger.queue.sources():
            self._pump_ms[source] = now_ms
        return True

    def _take(self, limits: Mapping[str, SourceLimits], now_ms: int) -> None:
        """Each gate takes its source's limits as they are now (a new gate if they changed)."""
        for source, gate in list(self.gates.items()):
            wanted = limits.get(source) or SourceLimits.unlimited(source)
            if wanted != gate.limits:
                self._replace(source, gate, wanted, now_ms)

    def _gate(self, source: str, now_ms: int) -> SourceGate:
        limits = (self._limits_of() or {}).get(source) or SourceLimits.unlimited(source)
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

    def _gate_of(self, source: str, now_ms: int | None = None) -> SourceGate:
        gate = self.gates.get(source)
        if gate is None:
            gate = self._gate(source, self._now_ms if now_ms is None else now_ms)
        return gate


def _place(state: StreamState, start_ms: int, end_ms: int, now_ms: int) -> tuple[int, int]:
    """The window's place in its source's queue: since when it waits (now: the back of it)."""
    for window in state.windows:
        if window.start_ms == start_ms:
            since_ms = window.waiting_since_ms
            return (now_ms if since_ms is None else since_ms, end_ms)
    return (now_ms, end_ms)
