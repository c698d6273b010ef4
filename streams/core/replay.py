"""The replay lane: bypassed windows dispatched again, beside the live lane and never in its way.

| input                      | rule                                                              |
|----------------------------|-------------------------------------------------------------------|
| a bypass (live lane)       | the window is listed (at most MAX_LISTED per stream, oldest drop) |
| replay(from_ms, to_ms)     | listed windows overlapping (from_ms, to_ms] are queued; none:     |
|                            | rejected                                                          |
| dispatch                   | queued windows go out while fewer than `concurrency` are in       |
|                            | flight, as tasks marked replay, attempt = failed attempts + 1     |
| ack of a replay attempt    | success: unlisted (a tombstone on `bypassed`), announced as a     |
|   (or of an earlier one)   | window of reason "replayed"; downstream_ms does not move          |
| nack / deadline passed     | failure: stays listed with attempts + 1 and the error (re-emitted)|
| heartbeat                  | deadline_ms = now + task_timeout_ms                               |
| nack/heartbeat of an       | ignored "stale"                                                   |
|   earlier attempt          |                                                                   |

A result belongs to this lane only when its window is listed and has a replay in flight; the
coordinator asks here first, then the live lane. Like the lifecycle, functions update the state
in place and take time as `now_ms`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streams.core._checks import check_int
from streams.core.config import StreamConfig
from streams.core.model import (
    NACK_WITHOUT_ERROR,
    BypassRecord,
    CommittedWindow,
    ErrorInfo,
    Result,
    Task,
    task_id,
)
from streams.errors import InvalidInput

# A stream that keeps failing lists one window per bypass; the oldest are dropped beyond this
# (and tombstoned on `bypassed`: they could no longer be replayed).
MAX_LISTED = 10_000


@dataclass(frozen=True, slots=True)
class Replay:
    """The control that dispatches a stream's bypassed windows in (from_ms, to_ms] again."""

    stream_id: str
    from_ms: int
    to_ms: int


@dataclass(slots=True)
class Listed:
    """A bypassed window that can be replayed, with its replay attempt if one is in flight."""

    start_ms: int
    end_ms: int
    attempts: int
    first_failed_ms: int
    bypassed_ms: int
    last_error: ErrorInfo | None
    queued: bool = False
    attempt: int = 0  # the replay attempt in flight, 0 if none
    deadline_ms: int = 0

    def record(self, stream_id: str) -> BypassRecord:
        return BypassRecord(
            stream_id,
            self.start_ms,
            self.end_ms,
            self.attempts,
            self.first_failed_ms,
            self.bypassed_ms,
            self.last_error,
        )


@dataclass(slots=True)
class ReplayState:
    stream_id: str
    listed: list[Listed] = field(default_factory=list)
    # Replayed windows whose commit and tombstone an at-least-once engine has not yet seen
    # delivered: its outbox, announced again after a crash (the adapter keeps it).
    announcing: list[CommittedWindow] = field(default_factory=list)

    @property
    def in_flight(self) -> int:
        return sum(1 for w in self.listed if w.attempt)

    @property
    def busy(self) -> bool:
        """Whether anything is queued, in flight or being announced (the coordinator must keep
        ticking it)."""
        return bool(self.announcing) or any(w.attempt or w.queued for w in self.listed)


@dataclass(frozen=True, slots=True)
class ReplayDecision:
    tasks: tuple[Task, ...] = ()
    relisted: tuple[BypassRecord, ...] = ()  # windows whose replay failed, with new attempts
    replayed: tuple[CommittedWindow, ...] = ()  # replayed successfully: each one tombstoned
    rejected: str | None = None
    ignored: str | None = None
    timeouts: int = 0


def note_bypass(state: ReplayState, record: BypassRecord) -> list[int]:
    """List a window the live lane just bypassed; return the start_ms of the oldest ones that
    no longer fit (to be tombstoned on `bypassed`)."""
    state.listed = [w for w in state.listed if w.start_ms != record.start_ms]
    state.listed.append(
        Listed(
            record.start_ms,
            record.end_ms,
            record.attempts,
            record.first_failed_ms,
            record.bypassed_ms,
            record.last_error,
        )
    )
    state.listed.sort(key=lambda w: w.start_ms)
    dropped = [w.start_ms for w in state.listed[:-MAX_LISTED]]
    del state.listed[:-MAX_LISTED]
    return dropped


def request(
    state: ReplayState,
    config: StreamConfig,
    from_ms: int,
    to_ms: int,
    concurrency: int,
    now_ms: int,
) -> ReplayDecision:
    """Queue every listed window overlapping (from_ms, to_ms] and dispatch what fits."""
    if to_ms <= from_ms:
        return ReplayDecision(rejected="to_ms: must be after from_ms")
    matched = [w for w in state.listed if w.start_ms < to_ms and w.end_ms > from_ms]
    if not matched:
        return ReplayDecision(rejected=f"no bypassed window of {state.stream_id!r} in range")
    for window in matched:
        if not window.attempt:
            window.queued = True
    return ReplayDecision(tasks=_dispatch(state, config, concurrency, now_ms))


def on_result(
    state: ReplayState,
    config: StreamConfig,
    result: Result,
    concurrency: int,
    now_ms: int,
) -> ReplayDecision | None:
    """Handle a result of the replay lane; None when the result is not for this lane."""
    window = next(
        (w for w in state.listed if w.start_ms == result.start_ms and w.end_ms == result.end_ms),
        None,
    )
    if window is None or not window.attempt:
        return None
    if result.attempt > window.attempt:
        return ReplayDecision(rejected="attempt: this replay attempt was never dispatched")
    if result.outcome == "ack":
        state.listed.remove(window)
        done = CommittedWindow(window.start_ms, window.end_ms, "replayed", window.attempt)
        tasks = _dispatch(state, config, concurrency, now_ms)
        return ReplayDecision(tasks=tasks, replayed=(done,))
    if result.attempt < window.attempt:
        return ReplayDecision(ignored="stale")
    if result.outcome == "heartbeat":
        window.deadline_ms = now_ms + config.task_timeout_ms
        return ReplayDecision()
    error = result.error or NACK_WITHOUT_ERROR
    record = _fail(state, window, error)
    return ReplayDecision(tasks=_dispatch(state, config, concurrency, now_ms), relisted=(record,))


def advance(
    state: ReplayState, config: StreamConfig, concurrency: int, now_ms: int
) -> ReplayDecision:
    """Fail replay attempts whose deadline passed, then dispatch what fits."""
    relisted = []
    for window in state.listed:
        if window.attempt and window.deadline_ms <= now_ms:
            error = ErrorInfo("timeout", f"no result for the replay by {window.deadline_ms}")
            relisted.append(_fail(state, window, error))
    tasks = _dispatch(state, config, concurrency, now_ms)
    return ReplayDecision(tasks=tasks, relisted=tuple(relisted), timeouts=len(relisted))


def next_due_ms(state: ReplayState) -> int | None:
    deadlines = [w.deadline_ms for w in state.listed if w.attempt]
    return min(deadlines) if deadlines else None


def _fail(state: ReplayState, window: Listed, error: ErrorInfo) -> BypassRecord:
    window.attempts = window.attempt
    window.attempt = 0
    window.deadline_ms = 0
    window.last_error = error
    return window.record(state.stream_id)


def _dispatch(
    state: ReplayState, config: StreamConfig, concurrency: int, now_ms: int
) -> tuple[Task, ...]:
    free = concurrency - state.in_flight
    tasks = []
    for window in state.listed:
        if free <= 0:
            break
        if not window.queued:
            continue
        window.queued = False
        window.attempt = window.attempts + 1
        window.deadline_ms = now_ms + config.task_timeout_ms
        free -= 1
        tasks.append(
            Task(
                task_id(state.stream_id, window.start_ms, window.attempt),
                state.stream_id,
                window.start_ms,
                window.end_ms,
                config.step_ms,
                window.attempt,
                now_ms,
                window.deadline_ms,
                config.params,
                replay=True,
            )
        )
    return tuple(tasks)


def replay_to_dict(state: ReplayState) -> dict[str, Any]:
    return {
        "v": 1,
        "stream_id": state.stream_id,
        "listed": [
            [
                w.start_ms,
                w.end_ms,
                w.attempts,
                w.first_failed_ms,
                w.bypassed_ms,
                None if w.last_error is None else [w.last_error.kind, w.last_error.message],
                w.queued,
                w.attempt,
                w.deadline_ms,
            ]
            for w in state.listed
        ],
        "announcing": [[w.start_ms, w.end_ms, w.attempts] for w in state.announcing],
    }


def replay_from_dict(d: Any) -> ReplayState:
    if not isinstance(d, dict) or d.get("v") != 1:
        raise InvalidInput("replay", "not a replay state of version 1")
    try:
        listed = []
        for item in d["listed"]:
            start, end, attempts, first, bypassed, error, queued, attempt, deadline = item
            listed.append(
                Listed(
                    check_int("start_ms", start),
                    check_int("end_ms", end),
                    check_int("attempts", attempts),
                    check_int("first_failed_ms", first),
                    check_int("bypassed_ms", bypassed),
                    None if error is None else ErrorInfo(str(error[0]), str(error[1])),
                    bool(queued),
                    check_int("attempt", attempt),
                    check_int("deadline_ms", deadline),
                )
            )
        announcing = [
            CommittedWindow(
                check_int("start_ms", start), check_int("end_ms", end), "replayed",
                check_int("attempt", attempt),
            )
            for start, end, attempt in d.get("announcing", ())
        ]  # fmt: skip
        return ReplayState(str(d["stream_id"]), listed, announcing)
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput("replay", f"malformed: {exc}") from exc
