"""Publishing every stream's view (streams.core.view) on the compacted `streams` topic.

A view goes out when it differs from the one last published from the record (its time of
change aside), and a deleted stream gets a tombstone. When they go out is the engine's delivery:
with the event's other outputs under Faust (streams.coordinator.faust.outbox), at checkpoint and
at most once per interval under the Kafka transaction (streams.coordinator.confluent.delivery).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streams.coordinator.announcer import Callback, Message
from streams.coordinator.record import Record
from streams.core.view import view_of
from streams.topics import Topics
from streams.wire import encode_view

log = logging.getLogger("streams.coordinator")

# What `Record.published` holds once a deleted stream's tombstone went out.
_DELETED: tuple[Any, ...] = ("deleted",)


class Views:
    """A stream's view or tombstone as a message, once per change; when it goes out is the
    engine's delivery (streams.coordinator.faust.outbox.OutboxViews, or
    streams.coordinator.confluent.delivery.TransactionViews)."""

    def __init__(self, topics: Topics, wake: Callable[[str], None]) -> None:
        self._topic = topics.streams  # a `Topics` property formats it on every read
        self._wake = wake  # have a stream's partition ticked for it at once
        # Streams whose view or tombstone failed to be delivered (at least once only).
        self._resend: set[str] = set()
        self._tombstones: set[str] = set()

    # -- what the engine's delivery decides ------------------------------------------------

    def with_save(self, record: Record, now_ms: int) -> Message | None:
        """The view to send with an event's outputs (None: it goes out later)."""
        raise NotImplementedError

    def deleted(self, stream_id: str) -> Message | None:
        """The tombstone to send with a deleted stream's outputs (None: it goes out later)."""
        raise NotImplementedError

    def rebuilt(
        self, stream_id: str, owed: bool, record: Record | None, now_ms: int
    ) -> Message | None:
        """A stream of a rebuilt partition (`owed`: its stored record owes a view)."""
        raise NotImplementedError

    def due(self, now_ms: int) -> bool:
        """Whether a view deferred to a time is due."""
        return False

    def _on_failed(self, stream_id: str, tombstone: bool) -> Callback:
        """What a failed delivery of the stream's view (or tombstone) does."""
        raise NotImplementedError

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
        return (self._topic, stream_id.encode(), value, None, self._on_failed(stream_id, False))

    def tombstone(self, stream_id: str) -> Message:
        self._resend.discard(stream_id)
        return (self._topic, stream_id.encode(), None, None, self._on_failed(stream_id, True))

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

    def reset(self) -> None:
        """Forget what is in memory; the rebuild that follows notes every owed view again."""
        self._resend.clear()
        self._tombstones.clear()
