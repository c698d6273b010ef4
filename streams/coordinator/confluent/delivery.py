"""The `confluent` engine's delivery: the Kafka transaction is the unit of work.

Outputs are durable exactly when the state is, so there is no outbox and no delivery callback:
a record changed by an event is encoded into the transaction's buffer
(streams.coordinator.confluent.records), each stream's finished windows are announced in one
commit per transaction, and views go out at checkpoint, in the transaction that holds the change,
at most once per `interval_ms` per stream: a change within the interval after a view defers the
next view to the interval's end (a catching-up stream changes with every result, and a view per
result was an eighth of the Processor's time; readers refresh about once a second). A deferred
view is noted in the stream's stored record (`Record.view_owed`), so that a new owner publishes
it after a crash or a rebalance. A tombstone is never deferred.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from streams.coordinator.announcer import Announcer, Callback, Message, send_all
from streams.coordinator.confluent.records import TransactionRecords
from streams.coordinator.ports import Emitter, StateStore
from streams.coordinator.record import Record
from streams.coordinator.replays import ReplayAnnouncer
from streams.coordinator.telemetry.metrics import CoordinatorMetrics
from streams.coordinator.views import Views
from streams.core import Commit
from streams.core.announce import announce_full
from streams.errors import InvalidInput, TidemarkError
from streams.topics import Topics

# Deferred views published per checkpoint at most: after a takeover of a million live streams,
# most are owed a view, and one transaction holding them all would outlive its timeout.
DUE_VIEWS_PER_CHECKPOINT = 2_000


class TransactionAnnouncer(Announcer):
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
        # Streams with windows to announce at the next checkpoint, in the order their windows
        # finished (a dict keeps it; sorting them cost more than announcing).
        self._unflushed: dict[str, None] = {}

    def loaded(self, stream_id: str, record: Record, now_ms: int) -> None:
        pass  # nothing is confirmed one by one: the commit confirms all

    def saved(self, stream_id: str, record: Record) -> None:
        pass

    def resend_owed(self, stream_id: str) -> bool:
        return False  # nothing is sent again: an aborted transaction is made again whole

    def announce_if_due(self, record: Record, now_ms: int, out: list[Message]) -> int | None:
        """Windows wait for the checkpoint, unless too many of them do (core.announce)."""
        state = record.state
        if not state.unannounced:
            return None
        stream_id = state.config.stream_id
        if not announce_full(len(state.unannounced)):
            self._unflushed[stream_id] = None
            return None
        self._unflushed.pop(stream_id, None)
        self.announce(record, now_ms, out)
        return None

    def rebuilt(self, stream_id: str, wake_ms: int | None, now_ms: int) -> int | None:
        self._unflushed[stream_id] = None  # announced at the next checkpoint
        return wake_ms

    def take_unflushed(self) -> list[str]:
        """The streams to announce at this checkpoint, in the order their windows finished
        (the same inputs give the same order)."""
        unflushed, self._unflushed = self._unflushed, {}
        return list(unflushed)

    def ended(self, stream_id: str) -> None:
        self._unflushed.pop(stream_id, None)

    def forget(self, stream_id: str) -> None:
        self._unflushed.pop(stream_id, None)

    def forget_where(self, owned: Callable[[str], bool]) -> None:
        self._unflushed = {s: None for s in self._unflushed if not owned(s)}

    def reset(self) -> None:
        self._unflushed.clear()

    def _announced(self, record: Record, commit: Commit) -> None:
        pass  # durable with the transaction: no outbox

    def _bypassed(self, record: Record, wire: dict[str, Any]) -> None:
        pass

    def _reannounced(self, record: Record) -> bool:
        """The outbox (left by the Faust engine) is emptied once sent again."""
        if record.outbox or record.pending_bypasses:
            record.outbox = []
            record.outbox_previous_ms = record.state.announced_ms
            record.pending_bypasses = []
            return True
        return False

    def _commit_callbacks(self, stream_id: str, commit: Commit) -> tuple[Callback, Callback]:
        return None, None

    def _bypass_callbacks(self, stream_id: str, start_ms: int) -> tuple[Callback, Callback]:
        return None, None


class TransactionViews(Views):
    """Views published at checkpoint, at most once per `interval_ms` per stream."""

    def __init__(self, topics: Topics, wake: Callable[[str], None], interval_ms: int = 0) -> None:
        super().__init__(topics, wake)
        self.interval_ms = interval_ms
        # (due_ms, stream_id) of the deferred views, and their streams.
        self._deferred: list[tuple[int, str]] = []
        self._owed: set[str] = set()

    def with_save(self, record: Record, now_ms: int) -> Message | None:
        return None  # at checkpoint

    def deleted(self, stream_id: str) -> Message | None:
        return None  # at checkpoint

    def rebuilt(
        self, stream_id: str, owed: bool, record: Record | None, now_ms: int
    ) -> Message | None:
        if owed or (record is not None and record.view_owed):
            self.owe(stream_id, now_ms)  # deferred by the last owner
        return None

    def _on_failed(self, stream_id: str, tombstone: bool) -> Callback:
        return None  # the commit confirms all

    def changed(self, record: Record, now_ms: int) -> Message | None:
        """At checkpoint: the view of a changed stream, unless its last view went
        out less than `interval_ms` ago; the view is then deferred to the interval's end
        (`take_due`), and the record notes it before the checkpoint encodes it."""
        published_ms = record.published_ms
        if (
            published_ms is not None
            and 0 <= now_ms - published_ms < self.interval_ms
            and record.state.deleted_ms is None
        ):
            record.view_owed = True
            self.owe(record.state.config.stream_id, published_ms + self.interval_ms)
            return None
        return self.message(record, now_ms)

    def owe(self, stream_id: str, due_ms: int) -> None:
        """Publish the stream's view at the first checkpoint from `due_ms` on (`take_due`):
        deferred by `changed`, or by the stream's last owner (a rebuild finds it noted in the
        stored record, and leaves the decoding to the checkpoints, a slice at a time)."""
        if stream_id not in self._owed:
            self._owed.add(stream_id)
            heapq.heappush(self._deferred, (due_ms, stream_id))

    def due(self, now_ms: int) -> bool:
        """Whether a deferred view is due, so that the engine commits for it."""
        deferred = self._deferred
        return bool(deferred) and deferred[0][0] <= now_ms

    def take_due(self, now_ms: int) -> Iterator[str]:
        """The streams whose deferred view is due, earliest first, at most
        DUE_VIEWS_PER_CHECKPOINT (the rest stay due: `due` keeps the engine committing)."""
        deferred, owed = self._deferred, self._owed
        limit, taken = DUE_VIEWS_PER_CHECKPOINT, 0
        while deferred and deferred[0][0] <= now_ms and taken < limit:
            _, stream_id = heapq.heappop(deferred)
            if stream_id in owed:
                owed.discard(stream_id)
                taken += 1
                yield stream_id

    def forget_where(self, owned: Callable[[str], bool]) -> None:
        super().forget_where(owned)
        self._owed = {s for s in self._owed if not owned(s)}  # the heap skips what it lacks

    def reset(self) -> None:
        """Forget what is in memory; the rebuild that follows notes every owed view again."""
        super().reset()
        self._deferred.clear()
        self._owed.clear()


class TransactionDelivery:
    """The confluent engine's unit of work: the Kafka transaction. Outputs join it as they are
    made; state changes and the announcements and views they owe join it at `checkpoint`."""

    def __init__(self, view_interval_ms: int = 0) -> None:
        self.view_interval_ms = view_interval_ms

    def records(self, store: StateStore) -> TransactionRecords:
        self._records = TransactionRecords(store)
        return self._records

    def announcer(
        self,
        topics: Topics,
        emitter: Emitter,
        stats: Counter[str],
        metrics: CoordinatorMetrics,
        flush_ms: int,
        wake: Callable[[str], None],
    ) -> TransactionAnnouncer:
        self._announcer = TransactionAnnouncer(topics, emitter, stats, metrics, flush_ms, wake)
        return self._announcer

    def replay_announcer(self, topics: Topics, emitter: Emitter) -> ReplayAnnouncer:
        return ReplayAnnouncer(topics, emitter)  # sent once: it commits with the state

    def views(self, topics: Topics, wake: Callable[[str], None]) -> TransactionViews:
        self._views = TransactionViews(topics, wake, self.view_interval_ms)
        return self._views

    def dirty(self, now_ms: int) -> bool:
        """Whether the next checkpoint has state to write (a tick can change a stream without
        any output: a collection, a requeue) or a deferred view to publish."""
        return self._records.dirty() or self._views.due(now_ms)

    def checkpoint(
        self, now_ms: int, emitter: Emitter, failed: Callable[[str, Exception], None]
    ) -> list[str]:
        """Announce every stream's waiting windows in one commit, publish the view of every
        changed stream, and encode every changed record into the transaction."""
        records, announcer, views = self._records, self._announcer, self._views
        out: list[Message] = []
        for stream_id in announcer.take_unflushed():
            built = len(out)
            try:
                record = records.peek(stream_id)
                if record is None or not record.state.unannounced:
                    continue
                announcer.announce(record, now_ms, out)
                records.save(stream_id, record, None)
            except InvalidInput:
                continue  # unreadable: logged, left alone
            except TidemarkError:
                raise
            except Exception as exc:
                del out[built:]  # nothing of a stream that failed goes out
                failed(stream_id, exc)
        for stream_id, changed in records.changed():
            if changed is None:
                out.append(views.tombstone(stream_id))
                continue
            view = views.changed(changed, now_ms)
            if view is not None:
                out.append(view)
        for stream_id in views.take_due(now_ms):
            try:
                record = records.peek(stream_id)
            except InvalidInput:
                continue  # unreadable: logged, left alone
            if record is not None and record.view_owed and record.state.deleted_ms is None:
                view = views.message(record, now_ms)
                if view is not None:
                    out.append(view)
        send_all(emitter, out)
        return records.checkpoint()
