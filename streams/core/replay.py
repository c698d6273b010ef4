"""The replay lane: bypassed windows dispatched again, beside the live lane and never in its way.

| input                      | rule                                                              |
|----------------------------|-------------------------------------------------------------------|
| a bypass (live lane)       | the window is listed (at most MAX_LISTED per stream, oldest drop) |
|                            | with the live lane's last attempt of it                           |
| replay(from_ms, to_ms)     | listed windows overlapping (from_ms, to_ms] are queued; none:     |
|                            | rejected                                                          |
| dispatch                   | queued windows the live lane has passed (end_ms <= downstream_ms) |
|                            | go out while fewer than `concurrency` are in flight and the gate  |
|                            | admits them (lane "replay"; a denied one stays queued), as tasks  |
|                            | marked replay, of the stream's incarnation, numbered after every  |
|                            | attempt of the window so far (live or replay): a replay task id   |
|                            | never equals a live one                                           |
| result of a live attempt   | not this lane's (the live lane ignores it as a duplicate)         |
|   (attempt <= live's last) |                                                                   |
| result of an earlier       | rejected, naming `incarnation` or both pipelines, as the live     |
|   incarnation or pipeline  | lane does                                                         |
| ack_ms not in              | rejected as the live lane rejects it; nothing changes             |
|   (start_ms, end_ms]       |                                                                   |
| partial ack (ack_ms <      | rejected: a replay is acked whole. The window stays listed, the   |
|   end_ms)                  | attempt in flight until its nack or deadline                      |
| ack of the replay attempt  | success: unlisted (a tombstone on `bypassed`), announced as a     |
|   (or of an earlier one)   | window of reason "replayed" at the last announced mark, after the |
|                            | live lane's commit over it; downstream_ms does not move           |
| nack / deadline passed     | failure: stays listed with attempts + 1 and the error (re-emitted)|
| deadline during takeover   | not counted until the new owner has read `results` (expire=False) |
|   grace                    |                                                                   |
| heartbeat                  | deadline_ms = now + task_timeout_ms                               |
| nack/heartbeat of an       | ignored "stale"                                                   |
|   earlier replay attempt   |                                                                   |

A result belongs to this lane only when its window is listed, has a replay in flight and the
result's attempt is a replay attempt; the coordinator asks here first, then the live lane. Like
the lifecycle, functions update the state in place and take time as `now_ms`; `live` is the
stream's live state, read and never changed here.

Why replays wait for the live lane: a `replayed` commit carries the last announced mark as both
`previous_ms` and `downstream_ms`, so it must come after the live commit that moved the mark
over the window (its bypass). Dispatching only once `downstream_ms` has passed the window makes
sure that commit can be flushed before the replay's ack is announced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streams.core._checks import check_int
from streams.core.gate import Gate
from streams.core.lanes import replay_window
from streams.core.model import (
    NACK_WITHOUT_ERROR,
    BypassRecord,
    CommittedWindow,
    ErrorInfo,
    Result,
    StreamState,
    Task,
    task_id,
)
from streams.core.results import other_owner, result_problem
from streams.errors import InvalidInput

# A stream that keeps failing lists one window per bypass; the oldest are dropped beyond this
# (and tombstoned on `bypassed`: they could no longer be replayed).
MAX_LISTED = 10_000

PARTIAL_ACK = (
    "ack_ms: a replay must ack its whole window (ack_ms == end_ms); the window stays listed"
)


@dataclass(frozen=True, slots=True)
class Replay:
    """The control that dispatches a stream's bypassed windows in (from_ms, to_ms] again."""

    stream_id: str
    from_ms: int
    to_ms: int


@dataclass(slots=True)
class Listed:
    """A bypassed window that can be replayed, with its replay attempt if one is in flight.

    `attempts` counts failures (as on `bypassed`). Attempt numbers go on from the live lane's:
    `live_attempt` is the live lane's last attempt of the window (-1: take `attempts`, what a
    state stored before it was kept assumes), `replays` how many replay attempts went out, so
    the next one is `live_attempt + replays + 1`.
    """

    start_ms: int
    end_ms: int
    attempts: int
    first_failed_ms: int
    bypassed_ms: int
    last_error: ErrorInfo | None
    queued: bool = False
    attempt: int = 0  # the replay attempt in flight, 0 if none
    deadline_ms: int = 0
    live_attempt: int = -1
    replays: int = 0

    def __post_init__(self) -> None:
        if self.live_attempt < 0:
            self.live_attempt = self.attempts

    @property
    def last_attempt(self) -> int:
        """The window's last dispatched attempt, live or replay."""
        return self.live_attempt + self.replays

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
            # dispatches >= failures; a record without dispatches (0) falls back to failures
            live_attempt=max(record.dispatches, record.attempts),
        )
    )
    state.listed.sort(key=lambda w: w.start_ms)
    dropped = [w.start_ms for w in state.listed[:-MAX_LISTED]]
    del state.listed[:-MAX_LISTED]
    return dropped


def request(
    state: ReplayState,
    live: StreamState,
    from_ms: int,
    to_ms: int,
    concurrency: int,
    now_ms: int,
    gate: Gate | None = None,
) -> ReplayDecision:
    """Queue every listed window overlapping (from_ms, to_ms] and dispatch what fits (see
    `_dispatch`: a window the live lane has not passed yet waits for it). `gate`, here and in
    every function that dispatches: asked before each dispatch (streams.core.gate)."""
    if to_ms <= from_ms:
        return ReplayDecision(rejected="to_ms: must be after from_ms")
    matched = [w for w in state.listed if w.start_ms < to_ms and w.end_ms > from_ms]
    if not matched:
        return ReplayDecision(rejected=f"no bypassed window of {state.stream_id!r} in range")
    for window in matched:
        if not window.attempt:
            window.queued = True
    return ReplayDecision(tasks=_dispatch(state, live, concurrency, now_ms, gate))


def on_result(
    state: ReplayState,
    live: StreamState,
    result: Result,
    concurrency: int,
    now_ms: int,
    gate: Gate | None = None,
) -> ReplayDecision | None:
    """Handle a result of the replay lane; None when the result is not for this lane.

    Every check runs before anything changes: a rejected or ignored result leaves the state as
    it was.
    """
    window = replay_window(state, result)
    if window is None:
        return None  # the live lane's (a live attempt's result is a duplicate there)
    problem = result_problem(result, now_ms)
    if problem is not None:
        return ReplayDecision(rejected=problem)
    other = other_owner(result, live)
    if other is not None:
        return ReplayDecision(rejected=other)
    if result.attempt > window.last_attempt:
        return ReplayDecision(rejected="attempt: this replay attempt was never dispatched")
    if result.outcome == "ack":
        if result.ack_ms != window.end_ms:
            return ReplayDecision(rejected=PARTIAL_ACK)
        if live.downstream_ms < window.end_ms:
            # Dispatched before the live lane passed the window (only by a coordinator of an
            # earlier version): its commit cannot follow the bypass's yet.
            return ReplayDecision(ignored="early")
        state.listed.remove(window)
        done = CommittedWindow(window.start_ms, window.end_ms, "replayed", window.attempt)
        tasks = _dispatch(state, live, concurrency, now_ms, gate)
        return ReplayDecision(tasks=tasks, replayed=(done,))
    if result.attempt < window.attempt:
        return ReplayDecision(ignored="stale")
    if result.outcome == "heartbeat":
        window.deadline_ms = now_ms + live.config.task_timeout_ms
        return ReplayDecision()
    error = result.error or NACK_WITHOUT_ERROR
    record = _fail(state, window, error)
    tasks = _dispatch(state, live, concurrency, now_ms, gate)
    return ReplayDecision(tasks=tasks, relisted=(record,))


def advance(
    state: ReplayState,
    live: StreamState,
    concurrency: int,
    now_ms: int,
    expire: bool = True,
    gate: Gate | None = None,
) -> ReplayDecision:
    """Fail replay attempts whose deadline passed, then dispatch what fits.

    `expire=False` dispatches without failing any attempt: a new owner that has not yet read
    the results waiting for it must not time out a replay whose ack is among them (the live
    lane's takeover grace, `streams.core.lifecycle.advance`).
    """
    relisted = []
    if expire:
        for window in state.listed:
            if window.attempt and window.deadline_ms <= now_ms:
                error = ErrorInfo("timeout", f"no result for the replay by {window.deadline_ms}")
                relisted.append(_fail(state, window, error))
    tasks = _dispatch(state, live, concurrency, now_ms, gate)
    return ReplayDecision(tasks=tasks, relisted=tuple(relisted), timeouts=len(relisted))


def next_due_ms(
    state: ReplayState, live: StreamState, concurrency: int, deadlines: bool = True
) -> int | None:
    """The earliest `now_ms` at which `advance` would change something, or None if never: 0
    when a queued window can go out at once (the live lane has just passed it), whatever a
    gate would answer: a coordinator with a gate parks the streams it denied itself.

    `deadlines=False`: dispatches alone (what `advance(..., expire=False)` does)."""
    if _dispatchable(state, live, concurrency):
        return 0
    if not deadlines:
        return None
    deadlines_ms = [w.deadline_ms for w in state.listed if w.attempt]
    return min(deadlines_ms) if deadlines_ms else None


def _fail(state: ReplayState, window: Listed, error: ErrorInfo) -> BypassRecord:
    window.attempts += 1
    window.attempt = 0
    window.deadline_ms = 0
    window.last_error = error
    return window.record(state.stream_id)


def _dispatchable(state: ReplayState, live: StreamState, concurrency: int) -> bool:
    """Whether `_dispatch` would send something now."""
    if state.in_flight >= concurrency:
        return False
    return any(w.queued and w.end_ms <= live.downstream_ms for w in state.listed)


def _dispatch(
    state: ReplayState, live: StreamState, concurrency: int, now_ms: int, gate: Gate | None
) -> tuple[Task, ...]:
    """Send queued windows while fewer than `concurrency` are in flight, the oldest first, each
    once the live lane has passed it (downstream_ms >= its end) and the gate admits it (a
    denied one blocks none after it, as in the live lane)."""
    free = concurrency - state.in_flight
    config = live.config
    downstream_ms = live.downstream_ms
    tasks = []
    for window in state.listed:
        if free <= 0:
            break
        if not window.queued or window.end_ms > downstream_ms:
            continue
        if gate is not None and not gate.admit(
            live, window.start_ms, window.end_ms, "replay", now_ms
        ):
            continue
        window.queued = False
        window.replays += 1
        window.attempt = window.last_attempt
        window.deadline_ms = now_ms + config.task_timeout_ms
        free -= 1
        start_ms, attempt = window.start_ms, window.attempt
        tasks.append(Task(
            task_id(state.stream_id, start_ms, attempt), state.stream_id, start_ms, window.end_ms,
            config.step_ms, attempt, now_ms, window.deadline_ms, config.params, replay=True,
            incarnation=live.incarnation, pipeline=config.pipeline,
        ))  # fmt: skip
    return tuple(tasks)


def replay_to_dict(state: ReplayState) -> dict[str, Any]:
    return {
        "v": 2,
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
                w.live_attempt,
                w.replays,
            ]
            for w in state.listed
        ],
        "announcing": [[w.start_ms, w.end_ms, w.attempts] for w in state.announcing],
    }


def replay_from_dict(d: Any) -> ReplayState:
    """A replay state of version 2, or 1 (kept before replay attempts were numbered after the
    live lane's: a replay then numbered its attempt failures + 1, which goes on)."""
    if not isinstance(d, dict) or d.get("v") not in (1, 2):
        raise InvalidInput("replay", "not a replay state of version 1 or 2")
    try:
        listed = []
        for item in d["listed"]:
            start, end, attempts, first, bypassed, error, queued, attempt, deadline = item[:9]
            attempt = check_int("attempt", attempt)
            if d["v"] == 2:
                live_attempt, replays = item[9:]
            elif attempt:
                live_attempt, replays = attempt - 1, 1
            else:
                live_attempt, replays = attempts, 0
            listed.append(
                Listed(
                    check_int("start_ms", start),
                    check_int("end_ms", end),
                    check_int("attempts", attempts),
                    check_int("first_failed_ms", first),
                    check_int("bypassed_ms", bypassed),
                    None if error is None else ErrorInfo(str(error[0]), str(error[1])),
                    bool(queued),
                    attempt,
                    check_int("deadline_ms", deadline),
                    check_int("live_attempt", live_attempt),
                    check_int("replays", replays),
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
