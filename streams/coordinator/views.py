"""Publishing every stream's view (streams.core.view) on the compacted `streams` topic.

A view goes out when it differs from the one last published from the record (its time of
change aside), and a deleted stream gets a tombstone. Transactional: at checkpoint, in the
transaction that holds the change, and at most once per `interval_ms` per stream: a change
within the interval after a view defers the next view to the interval's end (a catching-up
stream changes with every result, and a view per result was an eighth of the Processor's time;
readers refresh about once a second). A deferred view is noted in the stream's stored record
(`Record.view_owed`), so that a new owner publishes it after a crash or a rebalance. A
tombstone is never deferred. At-least-once (Faust): with the event's other outputs, which
coalesces as commits do (progress shows as announced, so it moves when a commit goes out); a
failed delivery has the stream published again at its next tick, and a rebuilt partition
publishes all of its views (what a crash left unsent).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Iterator
from typing import Any

from streams.coordinator.announcer import Message
from streams.coordinator.record import Record
from streams.core.view import view_of
from streams.topics import Topics
from streams.wire import encode_view

log = logging.getLogger("streams.coordinator")

# Deferred views published per checkpoint at most: after a takeover of a million live streams,
# most are owed a view, and one transaction holding them all would outlive its timeout.
DUE_VIEWS_PER_CHECKPOINT = 2_000

# What `Record.published` holds once a deleted stream's tombstone went out.
_DELETED: tuple[Any, ...] = ("deleted",)


class Views:
    def __init__(
        self,
        topics: Topics,
        transactional: bool,
        wake: Callable[[str], None],
        interval_ms: int = 0,
    ) -> None:
        self.transactional = transactional
        self.interval_ms = interval_ms if transactional else 0
        # Transactional: (due_ms, stream_id) of the deferred views, and their streams.
        self._deferred: list[tuple[int, str]] = []
        self._owed: set[str] = set()
        self._topic = topics.streams  # a `Topics` property formats it on every read
        self._wake = wake  # have a stream's partition ticked for it at once
        # At-least-once: streams whose view or tombstone failed to be delivered.
        self._resend: set[str] = set()
        self._tombstones: set[str] = set()

    def message(self, record: Record, now_ms: int, force: bool = False) -> Message | None:
        """The stream's view if it changed since the last one published from `record`; for a
        deleted stream its tombstone, once."""
        if record.state.deleted_ms is not None:
            stream_id = record.state.config.stream_id
            failed = stream_id in self._resend or stream_id in self._tombstones
            if record.published is _DELETED and not force and not failed:
                return None
            self._tombstones.discard(stream_id)
            record.published = _DELETED
            return self.tombstone(stream_id)
        view = view_of(record.state, record.bypasses, record.committed_ms, now_ms)
        stream_id = view.stream_id
        key = view.key()
        if not force and record.published == key and stream_id not in self._resend:
            return None
        self._resend.discard(stream_id)
        self._tombstones.discard(stream_id)
        record.published = key
        record.published_ms = now_ms
        record.view_owed = False
        value = encode_view(view, record.config_json())
        if self.transactional:
            return (self._topic, stream_id.encode(), value, None, None)
        return (self._topic, stream_id.encode(), value, None, self._failed(stream_id, False))

    def changed(self, record: Record, now_ms: int) -> Message | None:
        """Transactional, at checkpoint: the view of a changed stream, unless its last view went
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

    def tombstone(self, stream_id: str) -> Message:
        self._resend.discard(stream_id)
        key = stream_id.encode()
        if self.transactional:
            return (self._topic, key, None, None, None)
        return (self._topic, key, None, None, self._failed(stream_id, True))

    def take_tombstone(self, stream_id: str) -> Message | None:
        """At-least-once: the tombstone of a deleted stream whose tombstone was not delivered."""
        if stream_id in self._tombstones:
            self._tombstones.discard(stream_id)
            return self.tombstone(stream_id)
        return None

    def forget_where(self, owned: Callable[[str], bool]) -> None:
        """Forget the streams `owned` accepts (their partitions went to another owner)."""
        self._resend = {s for s in self._resend if not owned(s)}
        self._tombstones = {s for s in self._tombstones if not owned(s)}
        self._owed = {s for s in self._owed if not owned(s)}  # the heap skips what it lacks

    def reset(self) -> None:
        """Forget what is in memory; the rebuild that follows notes every owed view again."""
        self._resend.clear()
        self._tombstones.clear()
        self._deferred.clear()
        self._owed.clear()

    def _failed(self, stream_id: str, tombstone: bool) -> Callable[[], None]:
        def failed() -> None:
            log.warning("the view of %r was not delivered; it is sent again", stream_id)
            (self._tombstones if tombstone else self._resend).add(stream_id)
            self._wake(stream_id)

        return failed
