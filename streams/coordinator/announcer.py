"""Announcing progress: a stream's finished windows go out on `commits` (and its bypass records
on `bypassed`). What the engines share is here; when a commit goes out and what confirms it is the
engine's delivery: the Faust engine's outbox with delivery confirmations
(streams.coordinator.faust.outbox.OutboxAnnouncer), or the Kafka transaction, where outputs are
durable exactly when the state is (streams.coordinator.confluent.delivery.TransactionAnnouncer).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeAlias

import orjson

from streams.coordinator.ports import Emitter
from streams.coordinator.record import Record
from streams.coordinator.telemetry.metrics import CoordinatorMetrics
from streams.core import BypassRecord, Commit, announce
from streams.core.announce import FLUSH_MAX_WINDOWS as FLUSH_MAX_WINDOWS  # re-exported
from streams.topics import Topics
from streams.wire import bypassed_key, encode_commit

Callback: TypeAlias = Callable[[], None] | None
# (topic, key, value, on_delivered, on_failed): an output built, not sent yet.
Message: TypeAlias = tuple[str, bytes, bytes | None, Callback, Callback]


def send_all(emitter: Emitter, messages: list[Message]) -> None:
    send = emitter.send
    for topic, key, value, on_delivered, on_failed in messages:
        if on_delivered is None and on_failed is None:
            send(topic, key, value)
        else:
            send(topic, key, value, on_delivered, on_failed)


class Announcer:
    """The announcements of both engines; the engine's delivery subclasses it."""

    def __init__(
        self,
        topics: Topics,
        emitter: Emitter,
        stats: Counter[str],
        metrics: CoordinatorMetrics,
        flush_ms: int,
        wake: Callable[[str], None],
    ) -> None:
        self.topics = topics
        self.emitter = emitter
        self.stats = stats
        self.metrics = metrics
        self.flush_ms = flush_ms
        self._commits_topic = topics.commits  # a `Topics` property formats it on every read
        self._wake = wake  # have a stream's partition ticked for it at once

    # -- what the engine's delivery decides ------------------------------------------------

    def loaded(self, stream_id: str, record: Record, now_ms: int) -> None:
        """A record was just loaded for an event or a tick of its stream."""
        raise NotImplementedError

    def saved(self, stream_id: str, record: Record) -> None:
        """The record was saved with the event's changes."""
        raise NotImplementedError

    def resend_owed(self, stream_id: str) -> bool:
        """Whether the stream's announcements wait to be sent again (its tick does it)."""
        raise NotImplementedError

    def announce_if_due(self, record: Record, now_ms: int, out: list[Message]) -> int | None:
        """Announce the stream's finished windows when it is time; return when to announce next
        if windows are left waiting for a time (None: no time to wait for)."""
        raise NotImplementedError

    def rebuilt(self, stream_id: str, wake_ms: int | None, now_ms: int) -> int | None:
        """A rebuilt stream has unannounced windows; return when its partition ticks for it."""
        raise NotImplementedError

    def ended(self, stream_id: str) -> None:
        """The stream was deleted: it flushes no more (its last windows went out with the
        delete)."""
        raise NotImplementedError

    def forget(self, stream_id: str) -> None:
        raise NotImplementedError

    def forget_where(self, owned: Callable[[str], bool]) -> None:
        """Forget the streams `owned` accepts (their partitions went to another owner)."""
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError

    def _announced(self, record: Record, commit: Commit) -> None:
        """A commit of the record's windows was built (it goes out with the event)."""
        raise NotImplementedError

    def _bypassed(self, record: Record, wire: dict[str, Any]) -> None:
        """A bypass record of the stream was built."""
        raise NotImplementedError

    def _reannounced(self, record: Record) -> bool:
        """The record's outbox went out again; return whether the record changed."""
        raise NotImplementedError

    def _commit_callbacks(self, stream_id: str, commit: Commit) -> tuple[Callback, Callback]:
        raise NotImplementedError

    def _bypass_callbacks(self, stream_id: str, start_ms: int) -> tuple[Callback, Callback]:
        raise NotImplementedError

    # -- building the announcements --------------------------------------------------------

    def bypass(self, record: Record, bypass: BypassRecord, out: list[Message]) -> None:
        wire = bypass.to_wire()
        self._bypassed(record, wire)
        out.append(self._bypass_message(record.state.config.stream_id, wire))
        self.stats["bypasses"] += 1

    def announce(self, record: Record, now_ms: int, out: list[Message]) -> None:
        record.state, commit = announce(record.state, now_ms)
        if commit is None:
            return
        record.committed_ms = now_ms
        self._announced(record, commit)
        out.append(self._commit_message(commit))

    def reannounce(self, record: Record, now_ms: int) -> bool:
        """Send the outbox again: one commit for every unconfirmed window, and the pending
        bypass records; returns whether the record changed and needs a save."""
        stream_id = record.state.config.stream_id
        out: list[Message] = []
        commit = record.outbox_commit(now_ms)
        if commit is not None:
            out.append(self._commit_message(commit))
            self.stats["reannounced"] += 1
        for wire in record.pending_bypasses:
            out.append(self._bypass_message(stream_id, wire))
        send_all(self.emitter, out)
        return self._reannounced(record)

    # -- messages ------------------------------------------------------------------------

    def _commit_message(self, commit: Commit) -> Message:
        self.stats["commits"] += 1
        self.metrics.committed(commit)
        stream_id = commit.stream_id
        delivered, failed = self._commit_callbacks(stream_id, commit)
        return (self._commits_topic, stream_id.encode(), encode_commit(commit), delivered, failed)

    def _bypass_message(self, stream_id: str, wire: dict[str, Any]) -> Message:
        start_ms = wire["start_ms"]
        key = bypassed_key(stream_id, start_ms)
        delivered, failed = self._bypass_callbacks(stream_id, start_ms)
        return (self.topics.bypassed, key, orjson.dumps(wire), delivered, failed)
