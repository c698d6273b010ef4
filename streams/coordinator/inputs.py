"""The input path: decode → load → decide → save → emit, for one `control` or `results` input.

Malformed input is rejected (to `rejected`, with a reason), never raised. An unexpected exception
while handling a stream is isolated to that stream: its record goes back to how it was before the
event, the event is counted (`stream_errors`) and logged, and the input is rejected with a reason.
Errors of the engine (a `TidemarkError` other than `InvalidInput`: broker, transaction) are not
the stream's fault and propagate.
"""

from __future__ import annotations

import logging
from collections import Counter

from streams.coordinator.admission import Admission
from streams.coordinator.announcer import Announcer, Message, send_all
from streams.coordinator.health import SourceHealth
from streams.coordinator.index import DueIndex
from streams.coordinator.keys import KeyCheck
from streams.coordinator.ports import Emitter
from streams.coordinator.record import Record
from streams.coordinator.records import Records
from streams.coordinator.replays import ReplayLane
from streams.coordinator.scavenger import Scavenger
from streams.coordinator.sources import SourceControls
from streams.coordinator.telemetry.metrics import CoordinatorMetrics
from streams.coordinator.views import Views
from streams.core import (
    Decision,
    Delete,
    Replay,
    Result,
    Upsert,
    apply_control,
    apply_result,
    next_due_ms,
)
from streams.core.admission import SourceDelete, SourceSet
from streams.core.results import UNKNOWN_STREAM, ended_reason
from streams.errors import InvalidInput, TidemarkError
from streams.topics import Topics, tasks_topic
from streams.wire import decode_control, decode_result, encode_task, rejected_value

log = logging.getLogger("streams.coordinator")


_RESULT_STATS = {outcome: f"results_{outcome}" for outcome in ("ack", "nack", "heartbeat")}


class _Rejected(Exception):
    """The core rejected the input with this reason (and changed nothing)."""


class Inputs:
    health: SourceHealth | None = None  # the outage guard (set by the Processor)
    admission: Admission | None = None  # the gate before each dispatch (set by the Processor)

    def __init__(
        self,
        topics: Topics,
        partitions: int,
        records: Records,
        announcer: Announcer,
        emitter: Emitter,
        index: DueIndex,
        replays: ReplayLane | None,
        stats: Counter[str],
        metrics: CoordinatorMetrics,
        views: Views,
        scavenger: Scavenger,
    ) -> None:
        self.topics = topics
        self.partitions = partitions
        self.records = records
        self.announcer = announcer
        self.emitter = emitter
        self.index = index
        self.replays = replays
        self.stats = stats
        self.metrics = metrics
        self.views = views
        self.scavenger = scavenger
        self.sources = SourceControls(topics, emitter, stats)  # source_set, source_delete
        self._loaded: str | None = None  # the stream whose record the current event holds
        # Per event: the topic names (a `Topics` property formats its name on every read).
        self._results_topic = topics.results
        self._control_topic = topics.control
        self._check_key = KeyCheck(partitions).check  # each key's partition, memoized

    def handle(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        now_ms: int,
    ) -> None:
        """Handle one input of `control` or `results` (anything else is rejected)."""
        self._loaded = None
        try:
            if topic == self._results_topic:
                self._result(partition, key, value, now_ms)
            elif topic == self._control_topic:
                self._control(partition, key, value, now_ms)
            else:
                raise InvalidInput("topic", f"{topic!r} is not an input topic")
        except _Rejected as exc:
            self.reject(topic, partition, offset, str(exc), key, value)
        except InvalidInput as exc:
            if self._loaded is not None:
                self.records.discard(self._loaded)
            self.reject(topic, partition, offset, str(exc), key, value)
        except TidemarkError:
            raise
        except Exception as exc:
            stream_id = self._loaded
            if stream_id is not None:
                self.failed(stream_id, exc)
            else:
                log.exception("input %s[%d]@%d failed", topic, partition, offset)
                self.stats["stream_errors"] += 1
                self.metrics.stream_error()
            reason = f"internal: handling it failed ({type(exc).__name__}: {exc})"
            self.reject(topic, partition, offset, reason, key, value)

    def _result(self, partition: int, key: bytes | None, value: bytes | None, now_ms: int) -> None:
        result = decode_result(value)
        stream_id = result.stream_id
        self._check_key(stream_id, key, partition)
        outcome = result.outcome
        self.stats[_RESULT_STATS[outcome]] += 1
        metrics = self.metrics
        metrics.result(outcome, result.pipeline)
        record = self.load(stream_id, now_ms)
        if record is None:
            state = None
        else:
            replays = self.replays
            if (
                replays is not None
                and replays.busy(stream_id)
                and self._replay_result(partition, record, result, now_ms)
            ):
                return
            state = record.state
        health = self.health
        hold_ms = 0 if health is None or state is None else health.hold_ms(state)
        decision = apply_result(state, result, now_ms, hold_ms, self.admission)
        if (decision.rejected is not None or decision.ignored is not None) and self._settled(
            decision
        ):
            return
        if outcome == "ack":
            metrics.accepted(stream_id, result, now_ms)
        self.apply(partition, stream_id, record, decision, now_ms)

    def _control(self, partition: int, key: bytes | None, value: bytes | None, now_ms: int) -> None:
        control = decode_control(value)
        if isinstance(control, SourceSet | SourceDelete):
            self._check_key(control.source, key, partition, source=True)
            self.sources.apply(control, now_ms)
            return
        stream_id = control.config.stream_id if isinstance(control, Upsert) else control.stream_id
        self._check_key(stream_id, key, partition)
        if isinstance(control, Delete):
            self._delete(partition, stream_id, control, now_ms)
            return
        record = self.load(stream_id, now_ms)
        if isinstance(control, Replay):
            self._replay_request(partition, record, control, now_ms)
            return
        decision = apply_control(record.state if record else None, control, now_ms, self.admission)
        if not self._settled(decision):
            self.apply(partition, stream_id, record, decision, now_ms)

    def _delete(self, partition: int, stream_id: str, control: Delete, now_ms: int) -> None:
        """A delete always works, whatever bytes are stored for the stream."""
        try:
            record = self.load(stream_id, now_ms)
        except InvalidInput:
            record = None
        if record is not None:
            decision = apply_control(record.state, control, now_ms, self.admission)
            if decision.rejected is None:
                self.apply(partition, stream_id, record, decision, now_ms)
                return
            if record.state.deleted_ms is not None:
                raise _Rejected(decision.rejected)  # deleted already
        if not self.records.exists(stream_id):
            raise _Rejected(UNKNOWN_STREAM)
        log.warning("deleting %r, whose stored state is unreadable or inconsistent", stream_id)
        self.apply(partition, stream_id, None, Decision(None), now_ms)

    def _settled(self, decision: Decision) -> bool:
        """Whether the decision was rejected (raised, to be rejected) or ignored (counted)."""
        if decision.rejected is not None:
            raise _Rejected(decision.rejected)
        if decision.ignored is not None:
            self.stats[decision.ignored] += 1
            self.metrics.ignored(decision.ignored)
            return True
        return False

    def load(self, stream_id: str, now_ms: int) -> Record | None:
        """The stream's record with delivery confirmations applied; None if it has none.

        At least once, an outbox owed again (a delivery of the stream failed) is announced
        again here, before the event decides anything: whatever the event sends next goes out
        after it (`Announcer`)."""
        record = self.records.load(stream_id)
        self._loaded = stream_id
        if record is not None:
            self.announcer.loaded(stream_id, record, now_ms)
        if self.admission is not None:
            self.admission.loaded(stream_id, None if record is None else record.state)
        return record

    def apply(
        self,
        partition: int,
        stream_id: str,
        record: Record | None,
        decision: Decision,
        now_ms: int,
        announce_now: bool = False,
    ) -> None:
        """Emit what the decision says, announce finished windows when due (`announce_now`: at
        once, whatever the engine's interval), save, and re-index. Every output is built and the
        record encoded before anything is sent, so that an event that fails on the way sends
        nothing.
        """
        self._loaded = stream_id
        state = decision.state
        stats = self.stats
        announcer = self.announcer
        if decision.timeouts or decision.requeues:
            stats["timeouts"] += decision.timeouts
            stats["requeues"] += decision.requeues
        if self.health is not None:
            self.health.note(partition, stream_id, state)
        if self.admission is not None:
            self.admission.note(partition, stream_id, state, now_ms)
        if state is None:
            self.records.delete(stream_id)
            if self.replays is not None:
                gone = None if record is None else record.state.config.source
                self.replays.delete(stream_id, partition, gone)
            self.index.set(partition, stream_id, None)
            self.announcer.forget(stream_id)
            tombstone = self.views.deleted(stream_id)  # None: the engine sends it later
            if tombstone is not None:
                send_all(self.emitter, [tombstone])
            self.metrics.applied(partition, stream_id, decision)
            return
        if state.deleted_ms is not None:  # just deleted (or a wake of a deleted one)
            if self.replays is not None:
                self.replays.delete(stream_id, partition, state.config.source)
            announcer.ended(stream_id)
        if record is None or (record.state is not state and record.state.deleted_ms is not None):
            record = Record.new(state)  # created, or created again after a delete
        else:
            record.state = state
        out: list[Message] = []
        tasks = decision.tasks
        if tasks:
            key = stream_id.encode()
            topic = tasks_topic(self.topics.prefix, state.config.pipeline)  # the workers' own
            for task in tasks:
                out.append((topic, key, encode_task(task), None, None))
            stats["tasks"] += len(tasks)
        if decision.bypasses:
            record.bypasses += len(decision.bypasses)
            for bypass in decision.bypasses:
                announcer.bypass(record, bypass, out)
            if self.replays is not None:
                self.replays.note_bypasses(stream_id, decision.bypasses)
        flush_at = None
        if announce_now:  # the live commit over a replayed window, before the replayed one
            announcer.announce(record, now_ms, out)
        elif state.unannounced:
            if state.deleted_ms is None:
                flush_at = announcer.announce_if_due(record, now_ms, out)
            else:
                # The windows finished before a delete go out with it, whatever the announcement
                # interval (Faust) or the transaction boundary (confluent) would have said:
                # nothing flushes a deleted stream later (issue 25, defect 10).
                announcer.announce(record, now_ms, out)
        records = self.records
        view = self.views.with_save(record, now_ms)  # None: the engine publishes it later
        if view is not None:
            out.append(view)
        encoded = records.encode(record)  # None: the engine encodes it later
        if out:
            send_all(self.emitter, out)
        records.save(stream_id, record, encoded)
        announcer.saved(stream_id, record)
        self.metrics.applied(partition, stream_id, decision)
        self.reindex(partition, record, flush_at, stream_id)

    def reindex(
        self,
        partition: int,
        record: Record,
        flush_at: int | None = None,
        stream_id: str | None = None,
    ) -> None:
        """When the stream next needs the clock: a dispatch, a deadline, an announcement or a
        replay."""
        if stream_id is None:
            stream_id = record.state.config.stream_id
        wake = next_due_ms(record.state, parked=self.admission is not None)
        if flush_at is not None and (wake is None or flush_at < wake):
            wake = flush_at
        replays = self.replays
        if replays is not None and replays.busy(stream_id):
            replay_ms = replays.next_due_ms(record.state)
            if replay_ms is not None and (wake is None or replay_ms < wake):
                wake = replay_ms
        if self.announcer.resend_owed(stream_id):
            # A failed delivery woke the stream; an event since must not put that off (a
            # deleted stream would have no tick at all until it is collected).
            wake = 0
        self.index.set(partition, stream_id, wake)
        state = record.state
        if (
            state.deleted_ms is not None
            or state.finished_ms is not None
            or (replays is not None and replays.oldest_bypass_ms(stream_id) is not None)
        ):
            self.scavenger.note(partition, stream_id, state)

    def failed(self, stream_id: str, exc: BaseException) -> None:
        """An event of the stream raised: put its record back and count it (no other stream
        is touched)."""
        self.records.discard(stream_id)
        self.stats["stream_errors"] += 1
        self.metrics.stream_error()
        log.error("handling stream %r failed; it is retried later", stream_id, exc_info=exc)

    def reject(
        self,
        topic: str,
        partition: int,
        offset: int,
        reason: str,
        key: bytes | None,
        value: bytes | None,
    ) -> None:
        self.stats["rejected"] += 1
        self.metrics.rejected(topic)
        log.warning("rejected %s[%d]@%d: %s", topic, partition, offset, reason)
        self.emitter.send(
            self.topics.rejected,
            key or b"",
            rejected_value(topic, partition, offset, reason, key, value),
        )

    def _replay_request(
        self, partition: int, record: Record | None, replay: Replay, now_ms: int
    ) -> None:
        if record is None:
            raise InvalidInput("stream_id", "unknown stream")
        if record.state.deleted_ms is not None:
            raise InvalidInput("stream_id", ended_reason(record.state))
        if self.replays is None:
            raise InvalidInput("type", "replay is not enabled on this coordinator")
        rejected = self.replays.request(record.state, replay, now_ms, partition)
        if rejected is not None:
            raise InvalidInput("replay", rejected)
        self.reindex(partition, record)

    def _replay_result(self, partition: int, record: Record, result: Result, now_ms: int) -> bool:
        """Handle a result of the replay lane; False when it belongs to the live lane."""
        assert self.replays is not None

        def announce_live() -> None:  # the live commit over a replayed window goes first
            sid = result.stream_id
            self.apply(partition, sid, record, Decision(record.state), now_ms, announce_now=True)

        decision = self.replays.on_result(record.state, result, now_ms, announce_live, partition)
        if decision is None:
            return False
        if decision.rejected is not None:
            raise _Rejected(decision.rejected)  # the core's reason names the field
        if decision.ignored is not None:
            self.stats[decision.ignored] += 1
            self.metrics.ignored(decision.ignored)
        self.reindex(partition, record)
        return True
