"""Announcing progress: when a stream's finished windows go out on `commits`, and (Faust only)
the outbox that keeps every announcement until the producer confirmed it.

At-least-once (Faust): commits are coalesced per `flush_ms`; a commit or bypass record stays in
the record's outbox until delivered, only a contiguous run of delivered commits leaves it, and a
failed delivery has the stream's outbox announced again at once. Transactional: outputs are
durable exactly when the state is, so there is no outbox, and each stream's windows are flushed
in one commit per transaction, at checkpoint.

At once means before anything else of the stream goes out: a failure wakes the stream for a
tick, but any event of it handled first (an ack, a replay ack, a control) announces the outbox
again as it loads the record (`resend_if_owed`), before it decides. Were its commit sent first,
a consumer would read (60000, 120000] while its mark is still 0 (or a `replayed` commit at
120000), and one that keeps its mark from `downstream_ms` would skip the failed span. The
re-announcement is a repeat of earlier links (allowed at least once), and it is sent even if
the event is then rejected or fails: it is owed whatever the event does, as at a tick.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeAlias

import orjson

from streams.coordinator.ports import Emitter
from streams.coordinator.record import Record
from streams.coordinator.telemetry.metrics import CoordinatorMetrics
from streams.core import BypassRecord, Commit, flush
from streams.core.announce import FLUSH_MAX_WINDOWS as FLUSH_MAX_WINDOWS  # re-exported
from streams.core.announce import announce_at_ms, announce_full
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
    def __init__(
        self,
        topics: Topics,
        emitter: Emitter,
        stats: Counter[str],
        metrics: CoordinatorMetrics,
        flush_ms: int,
        transactional: bool,
        wake: Callable[[str], None],
    ) -> None:
        self.topics = topics
        self.emitter = emitter
        self.stats = stats
        self.metrics = metrics
        self.flush_ms = flush_ms
        self.transactional = transactional
        self._commits_topic = topics.commits  # a `Topics` property formats it on every read
        self._wake = wake  # have a stream's partition ticked for it at once
        self._last_flush: dict[str, int] = {}
        # Faust: (previous_ms, downstream_ms) of delivered commits, and start_ms of delivered
        # bypass records, kept until a save of the stream records them; streams whose
        # delivery failed, to be announced again at their next tick.
        self._delivered: dict[str, list[tuple[int, int]]] = {}
        self._bypass_delivered: dict[str, set[int]] = {}
        self._resend: set[str] = set()
        # Transactional: streams with windows to flush at the next checkpoint, in the order
        # their windows finished (a dict keeps it; sorting them cost more than flushing).
        self._unflushed: dict[str, None] = {}

    # -- confirmations (at-least-once) ---------------------------------------------------

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
        """Whether a delivery of the stream failed and its outbox waits to be announced again
        (its next tick does it, or any event of it handled before)."""
        return stream_id in self._resend

    def take_resend(self, stream_id: str) -> bool:
        """Whether a delivery of the stream failed since its last re-announcement."""
        if stream_id in self._resend:
            self._resend.discard(stream_id)
            return True
        return False

    def resend_if_owed(self, record: Record, now_ms: int) -> None:
        """Announce the record's outbox again if a delivery of the stream failed since its last
        re-announcement (every load of a record does, at least once: see the module's doc)."""
        if self.take_resend(record.state.config.stream_id):
            self.reannounce(record, now_ms)

    # -- building the announcements --------------------------------------------------------

    def bypass(self, record: Record, bypass: BypassRecord, out: list[Message]) -> None:
        wire = bypass.to_wire()
        if not self.transactional:
            record.pending_bypasses.append(wire)
        out.append(self._bypass_message(record.state.config.stream_id, wire))
        self.stats["bypasses"] += 1

    def flush_if_due(self, record: Record, now_ms: int, out: list[Message]) -> int | None:
        """Announce the stream's finished windows when it is time; return when to flush next
        if windows are left waiting (at-least-once only; transactional waits for checkpoint).

        At-least-once, the first commit after a quiet interval goes out at once (so ack-to-commit
        latency is low) and later ones within the interval are coalesced into one; an event at a
        wall clock stepped back behind the last flush flushes at once.
        """
        state = record.state
        if not state.unannounced:
            return None
        stream_id = state.config.stream_id
        if self.transactional:
            if not announce_full(len(state.unannounced)):
                self._unflushed[stream_id] = None
                return None
            self._unflushed.pop(stream_id, None)
        else:
            last = self._last_flush.get(stream_id)
            at_ms = announce_at_ms(len(state.unannounced), now_ms, last, self.flush_ms)
            if at_ms != now_ms:
                return at_ms
            self._last_flush[stream_id] = now_ms
        self.flush(record, now_ms, out)
        return None

    def flush(self, record: Record, now_ms: int, out: list[Message]) -> None:
        record.state, commit = flush(record.state, now_ms)
        if commit is None:
            return
        record.committed_ms = now_ms
        if not self.transactional:
            record.announce(commit)
        out.append(self._commit_message(commit))

    def take_unflushed(self) -> list[str]:
        """Transactional: the streams to flush at this checkpoint, in the order their windows
        finished (the same inputs give the same order)."""
        unflushed, self._unflushed = self._unflushed, {}
        return list(unflushed)

    def note_unflushed(self, stream_id: str) -> None:
        self._unflushed[stream_id] = None

    def reannounce(self, record: Record, now_ms: int) -> bool:
        """Send the outbox again: one commit for every unconfirmed window, and the pending
        bypass records. Transactional, the outbox (left by the other engine) is then emptied;
        returns whether the record changed and needs a save."""
        stream_id = record.state.config.stream_id
        out: list[Message] = []
        commit = record.outbox_commit(now_ms)
        if commit is not None:
            out.append(self._commit_message(commit))
            self.stats["reannounced"] += 1
        for wire in record.pending_bypasses:
            out.append(self._bypass_message(stream_id, wire))
        send_all(self.emitter, out)
        if self.transactional and (record.outbox or record.pending_bypasses):
            record.outbox = []
            record.outbox_previous_ms = record.state.announced_ms
            record.pending_bypasses = []
            return True
        return False

    def ended(self, stream_id: str) -> None:
        """The stream was deleted: it flushes no more (its last windows went out with the
        delete), but its outbox is kept until it is collected, so its confirmations and resends
        still count (a delivery that failed before the delete is announced again)."""
        self._last_flush.pop(stream_id, None)
        self._unflushed.pop(stream_id, None)

    def forget(self, stream_id: str) -> None:
        self._last_flush.pop(stream_id, None)
        self._delivered.pop(stream_id, None)
        self._bypass_delivered.pop(stream_id, None)
        self._resend.discard(stream_id)
        self._unflushed.pop(stream_id, None)

    def forget_where(self, owned: Callable[[str], bool]) -> None:
        """Forget the streams `owned` accepts (their partitions went to another owner)."""
        for held in (self._last_flush, self._delivered, self._bypass_delivered):
            for stream_id in [s for s in held if owned(s)]:
                del held[stream_id]
        self._resend = {s for s in self._resend if not owned(s)}
        self._unflushed = {s: None for s in self._unflushed if not owned(s)}

    def reset(self) -> None:
        self._last_flush.clear()
        self._delivered.clear()
        self._bypass_delivered.clear()
        self._resend.clear()
        self._unflushed.clear()

    # -- messages ------------------------------------------------------------------------

    def _commit_message(self, commit: Commit) -> Message:
        self.stats["commits"] += 1
        self.metrics.committed(commit)
        stream_id = commit.stream_id
        key = stream_id.encode()
        value = encode_commit(commit)
        if self.transactional:
            return (self._commits_topic, key, value, None, None)
        span = (commit.previous_ms, commit.downstream_ms)

        def delivered() -> None:
            self._delivered.setdefault(stream_id, []).append(span)

        return (self._commits_topic, key, value, delivered, self._failed(stream_id))

    def _bypass_message(self, stream_id: str, wire: dict[str, Any]) -> Message:
        start_ms = wire["start_ms"]
        key = bypassed_key(stream_id, start_ms)
        value = orjson.dumps(wire)
        if self.transactional:
            return (self.topics.bypassed, key, value, None, None)

        def delivered() -> None:
            self._bypass_delivered.setdefault(stream_id, set()).add(start_ms)

        return (self.topics.bypassed, key, value, delivered, self._failed(stream_id))

    def _failed(self, stream_id: str) -> Callable[[], None]:
        def failed() -> None:
            self._resend.add(stream_id)
            self._wake(stream_id)

        return failed
