"""Partition ownership and time: which partitions this coordinator owns, their due-index, the
ticks that drive it, and the rebuild of a partition from the store.

A partition is rebuilt (indexed, its outboxes announced again) when it is assigned and after a
reset, before any input or tick of it is handled, so that a new owner never announces a commit
ahead of the ones its predecessor left unconfirmed. The partitions are those of `control` and
`results` (the Faust app passes its tick partitions, which are numbered alike).

Takeover grace: a new owner (a restart, a takeover) fails no attempt on its deadline until the
engine says it has read `results` up to where they stood at assignment (`on_caught_up`), since
the acks its predecessor never read may be waiting there. Until then a stream whose only due
work is a passed deadline is held out of the index, and put back once caught up; a partition
that is not caught up within `catch_up_max_ms` (monotonic) is treated as caught up, so that a
stuck read cannot suppress timeouts for good.

Two clocks: `now_ms`, the wall clock, passed in and used for window times only (due, deadline,
announcement); `monotonic_ms`, for intervals inside the process (a tick's resend), so that a step of
the wall clock neither withholds a tick nor sends a burst of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from streams import clock
from streams.coordinator.admission import Admission
from streams.coordinator.announcer import Announcer, send_all
from streams.coordinator.health import SourceHealth
from streams.coordinator.index import DueIndex
from streams.coordinator.inputs import Inputs
from streams.coordinator.records import Records
from streams.coordinator.replays import ReplayLane
from streams.coordinator.scavenger import Scavenger
from streams.coordinator.telemetry.metrics import CoordinatorMetrics
from streams.coordinator.views import Views
from streams.core import advance, release
from streams.core.outage import hold_started_ms
from streams.core.retry import RETRY_AFTER_ERROR_MS as RETRY_AFTER_ERROR_MS  # re-exported
from streams.core.retry import retry_after_error_ms
from streams.core.takeover import grace_ends_ms, grace_hold, grace_over
from streams.errors import InvalidInput, TidemarkError
from streams.kafka.partitioner import partition_of

log = logging.getLogger("streams.coordinator")

# A tick that has not come back after this long is considered lost and sent again.
TICK_RESEND_MS = 5000
# Streams indexed between two yields of an incremental rebuild (`Ownership.building`): at
# about 60 µs each, some 0.1 s of the event loop.
BUILD_SLICE = 2000


class Ownership:
    health: SourceHealth | None = None  # the outage guard (set by the Processor)
    admission: Admission | None = None  # the gate before each dispatch (set by the Processor)

    def __init__(
        self,
        partitions: int,
        records: Records,
        announcer: Announcer,
        inputs: Inputs,
        index: DueIndex,
        replays: ReplayLane | None,
        metrics: CoordinatorMetrics,
        views: Views,
        scavenger: Scavenger,
        monotonic_ms: Callable[[], int] = clock.monotonic_ms,
        catch_up_max_ms: int | None = None,
    ) -> None:
        self.partitions = partitions
        self.records = records
        self.announcer = announcer
        self.inputs = inputs
        self.index = index
        self.replays = replays
        self.metrics = metrics
        self.views = views
        self.scavenger = scavenger
        self.assigned: set[int] = set()
        self.unbuilt: set[int] = set()
        self._tick_sent: dict[int, int] = {}  # monotonic ms
        self._monotonic_ms = monotonic_ms
        self._catch_up_max_ms = catch_up_max_ms  # None: no grace (the engine never says)
        self._catching_up: dict[int, int] = {}  # partition -> monotonic ms it gives up waiting
        self._held: dict[int, set[str]] = {}  # streams whose passed deadlines wait for it
        self._epoch = 0  # moves on every change of ownership: voids a suspended `building`

    def partition(self, stream_id: str) -> int:
        return partition_of(stream_id.encode(), self.partitions)

    def owned_by(self, partitions: set[int]) -> Callable[[str], bool]:
        return lambda stream_id: partition_of(stream_id.encode(), self.partitions) in partitions

    # -- assignment ----------------------------------------------------------------------

    def on_assigned(self, partitions: Iterable[int]) -> None:
        self._epoch += 1
        for p in partitions:
            if p not in self.assigned:
                self.assigned.add(p)
                self.unbuilt.add(p)
                self._tick_sent.pop(p, None)
                ends_ms = grace_ends_ms(self._monotonic_ms(), self._catch_up_max_ms)
                if ends_ms is not None:
                    self._catching_up[p] = ends_ms
        if self.health is not None:  # it knows its sources again once these are rebuilt
            self.health.expect(self.unbuilt)

    def on_revoked(self, partitions: Iterable[int]) -> None:
        self._epoch += 1
        revoked = set(partitions)
        for p in revoked:
            self.assigned.discard(p)
            self.unbuilt.discard(p)
            self._tick_sent.pop(p, None)
            self._catching_up.pop(p, None)
            self._held.pop(p, None)
            self.index.drop(p)
            self.scavenger.drop(p)
            self.metrics.drop_partition(p)
        if self.health is not None:
            self.health.forget(revoked)
        if self.admission is not None:
            self.admission.forget(revoked)
        if revoked:
            owned = self.owned_by(revoked)
            self.records.forget(owned)
            self.announcer.forget_where(owned)
            self.views.forget_where(owned)
            if self.replays is not None:
                self.replays.forget(owned)

    def reset(self) -> None:
        """Everything in memory is void: every owned partition is rebuilt before it is used."""
        self._epoch += 1
        for p in self.assigned:
            self.index.drop(p)
            self.scavenger.drop(p)
        self.unbuilt = set(self.assigned)
        self._tick_sent.clear()
        self._held.clear()  # the rebuild indexes every stream again
        if self.health is not None:
            self.health.forget(self.assigned)
            self.health.expect(self.assigned)

    def on_caught_up(self, partition: int) -> None:
        """The engine has read `results` of `partition` up to where they stood at assignment:
        deadlines count from now on, and the streams held for them are due at once."""
        if self._catching_up.pop(partition, None) is None:
            return
        for stream_id in self._held.pop(partition, ()):
            self.index.set(partition, stream_id, 0)

    def _give_up_catching_up(self, mono_ms: int) -> None:
        for p, until_ms in list(self._catching_up.items()):
            if grace_over(until_ms, mono_ms):
                log.warning(
                    "partition %d: results not caught up within %d ms of its assignment; "
                    "deadlines count again",
                    p,
                    self._catch_up_max_ms,
                )
                self.on_caught_up(p)

    def wake(self, stream_id: str) -> None:
        """Have the stream's time-driven work run at the next tick of its partition."""
        p = self.partition(stream_id)
        if p in self.assigned:
            self.index.set(p, stream_id, 0)

    # -- ticks ---------------------------------------------------------------------------

    def partitions_to_tick(self, now_ms: int) -> list[int]:
        """Owned partitions that need a tick now: unbuilt, or with something due."""
        due = []
        mono_ms = self._monotonic_ms()
        if self._catching_up:
            self._give_up_catching_up(mono_ms)
        for p in sorted(self.assigned):
            sent = self._tick_sent.get(p)
            if sent is not None and mono_ms - sent < TICK_RESEND_MS:
                continue  # one tick in flight per partition is enough
            wake = self.index.next_wake_ms(p)
            scavenge_ms = self.scavenger.next_wake_ms(p)
            if scavenge_ms is not None and (wake is None or scavenge_ms < wake):
                wake = scavenge_ms
            if p in self.unbuilt or (wake is not None and wake <= now_ms):
                self._tick_sent[p] = mono_ms
                due.append(p)
        return due

    def on_tick(self, partition: int, now_ms: int, limit: int | None = None) -> int:
        """Time-driven work of one partition: dispatches, deadlines, flushes and re-sends due.

        Each stream is handled on its own: one that raises is put back and retried later, and
        the others go on. `limit`: at most this many due streams, the earliest (the others
        stay due for the next tick). Returns how many due streams it handled.
        """
        self._tick_sent.pop(partition, None)
        if partition not in self.assigned:
            return 0
        if self.unbuilt:
            self.build(now_ms)
        expire = partition not in self._catching_up
        due = self.index.pop_due(partition, now_ms, limit)
        for i, stream_id in enumerate(due):
            try:
                self._tick_stream(partition, stream_id, now_ms, expire)
            except TidemarkError as exc:
                if not isinstance(exc, InvalidInput):
                    for left in due[i:]:  # the engine's error: leave nothing unindexed
                        self.index.set(partition, left, now_ms)
                    raise
                self._failed(partition, stream_id, exc, now_ms)
            except Exception as exc:
                self._failed(partition, stream_id, exc, now_ms)
        self._scavenge(partition, now_ms)
        return len(due)

    def _scavenge(self, partition: int, now_ms: int) -> None:
        """One slice of the scavenger's due work (`streams.coordinator.scavenger`): bypassed
        windows past retention unlisted, ended streams past gc_grace_ms collected."""
        scavenger = self.scavenger
        for stream_id in scavenger.due(partition, now_ms):
            try:
                record = self.inputs.load(stream_id, now_ms)
                if record is None:
                    continue
                state = record.state
                if self.replays is not None:
                    self.replays.expire(state, now_ms)
                collect_at_ms = state.collect_at_ms()
                if collect_at_ms is not None and collect_at_ms <= now_ms:
                    decision = advance(state, now_ms)  # the core collects it: Decision(None)
                    self.inputs.apply(partition, stream_id, record, decision, now_ms)
                    if decision.state is None:
                        self.metrics.collected_stream()
                        continue
                scavenger.note(partition, stream_id, state)
            except TidemarkError as exc:
                if not isinstance(exc, InvalidInput):
                    raise
                log.error("scavenging %r skipped: %s", stream_id, exc)
            except Exception as exc:
                self.inputs.failed(stream_id, exc)
                scavenger.index.set(partition, stream_id, retry_after_error_ms(now_ms))

    def _tick_stream(self, partition: int, stream_id: str, now_ms: int, expire: bool) -> None:
        try:
            record = self.inputs.load(stream_id, now_ms)  # announces an outbox owed again
        except InvalidInput as exc:
            log.error("tick for %r skipped: %s", stream_id, exc)
            return
        if record is None:
            tombstone = self.views.take_tombstone(stream_id)
            if tombstone is not None:  # at-least-once: a tombstone was not delivered
                send_all(self.inputs.emitter, [tombstone])
            return
        if self.replays is not None:
            self.replays.advance(record.state, now_ms, expire, partition)  # grace covers it too
        state = record.state
        hold_ms = 0
        if self.health is not None:
            hold_ms = self.health.hold_ms(state)
            if not hold_ms and hold_started_ms(state) is not None:  # its source recovered
                released = release(state, now_ms, self.admission)
                self.inputs.apply(partition, stream_id, record, released, now_ms)
        decision = advance(state, now_ms, expire, hold_ms, self.admission)
        self.inputs.apply(partition, stream_id, record, decision, now_ms)
        if not expire and decision.state is not None:
            replays = self.replays
            replay_ms = None if replays is None else replays.next_due_ms(state)
            held = grace_hold(state, now_ms, replay_ms)
            if held is not None:  # a passed deadline (live or replay): held until caught up
                self.index.set(partition, stream_id, held.wake_ms)
                self._held.setdefault(partition, set()).add(stream_id)

    def _failed(self, partition: int, stream_id: str, exc: BaseException, now_ms: int) -> None:
        self.inputs.failed(stream_id, exc)
        if self.admission is not None:  # its retry asks the gate again: meanwhile it holds
            self.admission.failed(stream_id)  # no place in its source's queue
        self.index.set(partition, stream_id, retry_after_error_ms(now_ms))

    # -- rebuild -------------------------------------------------------------------------

    def build(self, now_ms: int) -> None:
        """Index the streams of every unbuilt partition and announce their outboxes again."""
        for _ in self.building(now_ms):
            pass

    def building(self, now_ms: int, slice_size: int = BUILD_SLICE) -> Iterator[int]:
        """`build`, a slice at a time: yields the streams indexed so far after every
        `slice_size`, so that an engine whose loop must keep serving (Faust's heartbeats run on
        its event loop) can let it run between slices. A rebalance or reset while it is
        suspended voids it (nothing more is written, every unbuilt partition stays unbuilt):
        build again."""
        epoch = self._epoch
        partitions = set(self.unbuilt)
        owned = self.owned_by(partitions)
        # Replays first: the scavenger's entry of a stream needs its oldest listed window.
        busy = [] if self.replays is None else self.replays.rebuild(owned)
        replaying = set(busy)
        count = 0
        backlog: dict[str, int] = {}  # per source, its streams due at the rebuild: paced
        # Records past what the cache holds may be indexed from their stored summaries (the
        # engine's records say whether they need every record decoded).
        for stream_id, summary, record in self.records.scan(owned):
            if summary is None:
                continue  # unreadable: logged, left alone
            count += 1
            if count % slice_size == 0:
                yield count
                if self._epoch != epoch:
                    log.info("indexing of partitions %s voided by a rebalance", sorted(partitions))
                    return
            p = self.partition(stream_id)
            if record is not None:  # its state too (streams by state, windows ready)
                self.metrics.track(p, record.state)
            elif summary.collect_at_ms is None:
                self.metrics.track_progress(p, stream_id, summary.downstream_ms, summary.in_flight)
            if self.health is not None:
                self.health.note_counts(p, stream_id, summary.source, summary.failing, summary.held)
            if self.admission is not None and summary.source is not None:
                self.admission.note_rebuilt(p, stream_id, summary.source, summary.in_flight, now_ms)
                if stream_id in replaying and self.replays is not None:  # its replays in flight
                    flying = self.replays.flying(stream_id)
                    self.admission.replays_rebuilt(p, summary.source, flying)
                if summary.wake_ms is not None and summary.wake_ms <= now_ms:
                    backlog[summary.source] = backlog.get(summary.source, 0) + 1
            if record is not None and self.announcer.reannounce(record, now_ms):
                self.records.save(stream_id, record, self.records.encode(record))
            view = self.views.rebuilt(stream_id, summary.view_owed, record, now_ms)
            if view is not None:
                send_all(self.inputs.emitter, [view])
            wake = summary.wake_ms
            if summary.unannounced:
                wake = self.announcer.rebuilt(stream_id, wake, now_ms)
            self.index.set(p, stream_id, wake)
            if summary.collect_at_ms is not None or (
                self.replays is not None and self.replays.oldest_bypass_ms(stream_id) is not None
            ):
                self.scavenger.note_due(
                    p, stream_id, summary.collect_at_ms, summary.bypass_retention_ms
                )
        for stream_id in busy:  # its first tick re-indexes it fully
            self.index.set(self.partition(stream_id), stream_id, now_ms)
        self.unbuilt -= partitions
        if self.health is not None:
            self.health.built(partitions)
        if self.admission is not None and backlog:
            self.admission.recover(backlog, now_ms)
        log.info("indexed %d streams of partitions %s", count, sorted(partitions))
