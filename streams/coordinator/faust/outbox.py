"""The Faust engine's delivery: its outbox with delivery confirmations (at least once).

Every save writes the store at once (records.WriteThroughRecords), and every output is sent with
the event that made it, with callbacks that the producer calls once it delivered or gave up:

- Commits are coalesced per `flush_ms`. A commit or bypass record stays in the record's outbox
  until delivered; only a contiguous run of delivered commits leaves it, and a failed delivery
  has the stream's outbox announced again at once.
- At once means before anything else of the stream goes out: a failure wakes the stream for a
  tick, but any event of it handled first (an ack, a replay ack, a control) announces the outbox
  again as it loads the record (`loaded`), before it decides. Were its commit sent first, a
  consumer would read (60000, 120000] while its mark is still 0 (or a `replayed` commit at
  120000), and one that keeps its mark from `downstream_ms` would skip the failed span. The
  re-announcement is a repeat of earlier links (allowed at least once), and it is sent even if
  the event is then rejected or fails: it is owed whatever the event does, as at a tick.
- A view goes out with the event's other outputs (which coalesces as commits do); a failed
  delivery has the stream published again at its next tick, and a rebuilt partition publishes
  all of its views (what a crash left unsent).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from streams.coordinator.announcer import Announcer, Callback, Message
from streams.coordinator.faust.records import WriteThroughRecords
from streams.coordinator.ports import Emitter, StateStore
from streams.coordinator.record import Record
from streams.coordinator.replays import ReplayAnnouncer, Watch
from streams.coordinator.telemetry.metrics import CoordinatorMetrics
from streams.coordinator.views import Views
from streams.core import Commit, CommittedWindow, ReplayState
from streams.core.announce import announce_at_ms
from streams.topics import Topics

log = logging.getLogger("streams.coordinator")


class OutboxAnnouncer(Announcer):
    def __init__(
        self,
        topics: Topics,
        emitter: Emitter,
        stats: Counter[str],
        metrics: CoordinatorMetrics,
        flush_ms: int,
        wake: Callable[[str], None],
    ) -> None:
        super().__init__(topics, emitter, stats, metrics, flush_ms, wake)
        self._last_flush: dict[str, int] = {}
        # (previous_ms, downstream_ms) of delivered commits, and start_ms of delivered bypass
        # records, kept until a save of the stream records them; streams whose delivery failed,
        # to be announced again at their next tick.
        self._delivered: dict[str, list[tuple[int, int]]] = {}
        self._bypass_delivered: dict[str, set[int]] = {}
        self._resend: set[str] = set()

    # -- confirmations -------------------------------------------------------------------

    def loaded(self, stream_id: str, record: Record, now_ms: int) -> None:
        """Apply the confirmations received so far, and announce the outbox again if a
        delivery of the stream failed since its last re-announcement (`confirm` and
        `resend_if_owed`, inlined: this runs for every event)."""
        delivered = self._delivered.get(stream_id)
        if delivered:
            record.confirm_commits(delivered)
        bypasses = self._bypass_delivered.get(stream_id)
        if bypasses:
            record.confirm_bypasses(bypasses)
        if stream_id in self._resend:
            self._resend.discard(stream_id)
            self.reannounce(record, now_ms)

    def confirm(self, stream_id: str, record: Record) -> None:
        """Apply the delivery confirmations received so far to a record just loaded."""
        delivered = self._delivered.get(stream_id)
        if delivered:
            record.confirm_commits(delivered)
        bypasses = self._bypass_delivered.get(stream_id)
        if bypasses:
            record.confirm_bypasses(bypasses)

    def saved(self, stream_id: str, record: Record) -> None:
        """The record is saved with its confirmations: forget those it holds now."""
        delivered = self._delivered.get(stream_id)
        if delivered is not None:
            mark = record.outbox_previous_ms
            kept = [span for span in delivered if span[1] > mark] if record.outbox else []
            if kept:
                self._delivered[stream_id] = kept
            else:
                del self._delivered[stream_id]
        self._bypass_delivered.pop(stream_id, None)

    def resend_owed(self, stream_id: str) -> bool:
        return stream_id in self._resend

    def take_resend(self, stream_id: str) -> bool:
        """Whether a delivery of the stream failed since its last re-announcement."""
        if stream_id in self._resend:
            self._resend.discard(stream_id)
            return True
        return False

    def resend_if_owed(self, record: Record, now_ms: int) -> None:
        if self.take_resend(record.state.config.stream_id):
            self.reannounce(record, now_ms)

    # -- when commits go out -------------------------------------------------------------

    def announce_if_due(self, record: Record, now_ms: int, out: list[Message]) -> int | None:
        """The first commit after a quiet interval goes out at once (so ack-to-commit latency
        is low) and later ones within the interval are coalesced into one; an event at a wall
        clock stepped back behind the last flush flushes at once (it must not withhold commits
        for as long as the step)."""
        state = record.state
        if not state.unannounced:
            return None
        stream_id = state.config.stream_id
        last = self._last_flush.get(stream_id)
        at_ms = announce_at_ms(len(state.unannounced), now_ms, last, self.flush_ms)
        if at_ms != now_ms:
            return at_ms
        self._last_flush[stream_id] = now_ms
        self.announce(record, now_ms, out)
        return None

    def rebuilt(self, stream_id: str, wake_ms: int | None, now_ms: int) -> int | None:
        return now_ms if wake_ms is None else min(wake_ms, now_ms)

    def ended(self, stream_id: str) -> None:
        """Its outbox is kept until it is collected, so its confirmations and resends still
        count (a delivery that failed before the delete is announced again)."""
        self._last_flush.pop(stream_id, None)

    def forget(self, stream_id: str) -> None:
        self._last_flush.pop(stream_id, None)
        self._delivered.pop(stream_id, None)
        self._bypass_delivered.pop(stream_id, None)
        self._resend.discard(stream_id)

    def forget_where(self, owned: Callable[[str], bool]) -> None:
        for held in (self._last_flush, self._delivered, self._bypass_delivered):
            for stream_id in [s for s in held if owned(s)]:
                del held[stream_id]
        self._resend = {s for s in self._resend if not owned(s)}

    def reset(self) -> None:
        self._last_flush.clear()
        self._delivered.clear()
        self._bypass_delivered.clear()
        self._resend.clear()

    # -- the outbox ----------------------------------------------------------------------

    def _announced(self, record: Record, commit: Commit) -> None:
        record.announce(commit)

    def _bypassed(self, record: Record, wire: dict[str, Any]) -> None:
        record.pending_bypasses.append(wire)

    def _reannounced(self, record: Record) -> bool:
        return False  # the outbox stays until its deliveries are confirmed

    def _commit_callbacks(self, stream_id: str, commit: Commit) -> tuple[Callback, Callback]:
        span = (commit.previous_ms, commit.downstream_ms)

        def delivered() -> None:
            self._delivered.setdefault(stream_id, []).append(span)

        return delivered, self._failed(stream_id)

    def _bypass_callbacks(self, stream_id: str, start_ms: int) -> tuple[Callback, Callback]:
        def delivered() -> None:
            self._bypass_delivered.setdefault(stream_id, set()).add(start_ms)

        return delivered, self._failed(stream_id)

    def _failed(self, stream_id: str) -> Callable[[], None]:
        def failed() -> None:
            self._resend.add(stream_id)
            self._wake(stream_id)

        return failed


class OutboxViews(Views):
    """Views sent with the event's other outputs, published again when one was not delivered."""

    with_save = Views.message  # the view goes out with the event's other outputs

    def deleted(self, stream_id: str) -> Message | None:
        return self.tombstone(stream_id)

    def rebuilt(
        self, stream_id: str, owed: bool, record: Record | None, now_ms: int
    ) -> Message | None:
        """What a crash may have left unsent: every view of a rebuilt partition again."""
        return None if record is None else self.message(record, now_ms, force=True)

    def _on_failed(self, stream_id: str, tombstone: bool) -> Callback:
        def failed() -> None:
            log.warning("the view of %r was not delivered; it is sent again", stream_id)
            (self._tombstones if tombstone else self._resend).add(stream_id)
            self._wake(stream_id)

        return failed


class OutboxReplayAnnouncer(ReplayAnnouncer):
    """Replayed windows announced at least once: each stays in its state's `announcing` until
    its commit and its tombstone are both delivered, like a live commit in its record's outbox.
    A crash after the save announces it again at the rebuild (nothing watches it then), a
    failed delivery at the stream's next tick, and a tick after both deliveries drops it."""

    def __init__(self, topics: Topics, emitter: Emitter) -> None:
        super().__init__(topics, emitter)
        # (stream, start_ms) -> how many of its commit and tombstone are still unconfirmed
        # (0: both delivered); streams with a failed delivery.
        self._unconfirmed: dict[tuple[str, int], int] = {}
        self._resend: set[str] = set()

    def replayed(
        self, state: ReplayState, windows: Iterable[CommittedWindow], mark_ms: int, now_ms: int
    ) -> None:
        windows = tuple(windows)
        state.announcing.extend(windows)
        self._announce(state.stream_id, windows, mark_ms, now_ms)

    def settle(self, state: ReplayState, mark_ms: int, now_ms: int) -> bool:
        """Drop the windows both of whose messages were delivered, and announce the rest again
        after a failed delivery (or if nothing watches them)."""
        if not state.announcing:
            return False
        stream_id, unconfirmed = state.stream_id, self._unconfirmed
        confirmed = {
            w.start_ms for w in state.announcing if unconfirmed.get((stream_id, w.start_ms)) == 0
        }
        for start_ms in confirmed:
            del unconfirmed[(stream_id, start_ms)]
        state.announcing = [w for w in state.announcing if w.start_ms not in confirmed]
        unwatched = any((stream_id, w.start_ms) not in unconfirmed for w in state.announcing)
        if state.announcing and (stream_id in self._resend or unwatched):
            self._resend.discard(stream_id)
            self._announce(stream_id, tuple(state.announcing), mark_ms, now_ms)
        return bool(confirmed)

    def forget(self, owned: Callable[[str], bool]) -> None:
        self._unconfirmed = {k: n for k, n in self._unconfirmed.items() if not owned(k[0])}
        self._resend = {s for s in self._resend if not owned(s)}

    def reset(self) -> None:
        self._unconfirmed = {}
        self._resend = set()

    def _announce(
        self, stream_id: str, windows: tuple[CommittedWindow, ...], mark_ms: int, now_ms: int
    ) -> None:
        for window in windows:
            self._unconfirmed[(stream_id, window.start_ms)] = 2
        self.send(stream_id, windows, mark_ms, now_ms, lambda ws: self._watch(stream_id, ws))

    def _watch(self, stream_id: str, windows: tuple[CommittedWindow, ...]) -> Watch:
        def delivered() -> None:
            for window in windows:
                key = (stream_id, window.start_ms)
                if key in self._unconfirmed:
                    self._unconfirmed[key] -= 1

        def failed() -> None:
            self._resend.add(stream_id)

        return delivered, failed


class OutboxDelivery:
    """The Faust engine's unit of work: every output sent with its event, confirmed one by one;
    nothing waits for a checkpoint."""

    def records(self, store: StateStore) -> WriteThroughRecords:
        return WriteThroughRecords(store)

    def announcer(
        self,
        topics: Topics,
        emitter: Emitter,
        stats: Counter[str],
        metrics: CoordinatorMetrics,
        flush_ms: int,
        wake: Callable[[str], None],
    ) -> OutboxAnnouncer:
        return OutboxAnnouncer(topics, emitter, stats, metrics, flush_ms, wake)

    def replay_announcer(self, topics: Topics, emitter: Emitter) -> OutboxReplayAnnouncer:
        return OutboxReplayAnnouncer(topics, emitter)

    def views(self, topics: Topics, wake: Callable[[str], None]) -> OutboxViews:
        return OutboxViews(topics, wake)

    def dirty(self, now_ms: int) -> bool:
        return False

    def checkpoint(
        self, now_ms: int, emitter: Emitter, failed: Callable[[str, Exception], None]
    ) -> list[str]:
        return []  # everything is already written and sent
