"""The window lifecycle: every rule that moves a stream lives in this module.

| input                   | rule                                                                  |
|-------------------------|-----------------------------------------------------------------------|
| generation              | windows (frontier, frontier + window_ms], at most max_in_flight       |
| dispatch                | when not paused, now >= due_ms (end_ms + delay_ms, or retry time) and |
|                         | the gate admits it: attempt += 1, deadline_ms = now + task_timeout_ms |
| denied by the gate      | not dispatched: attempt, due_ms, deadline_ms unchanged; it waits      |
|   (core.gate)           | (waiting_since_ms, core.waiting), asked again at every decision. Due  |
|                         | windows are asked in order; a denial blocks none after it             |
| ack of any dispatched   | (start, ack_ms] is finished. A partial ack of the last window moves   |
|   attempt               | the frontier to ack_ms; of an earlier one leaves (ack_ms, end] to do  |
| nack "shutdown"         | requeued at once; the retry budget is untouched, for a window's first |
|                         | SHUTDOWN_REQUEUES_MAX; later ones are failures (as the next row)      |
| nack or passed deadline | a failure: bypass if the kind is non-retryable, max_attempts failed   |
|   of the current attempt| or now - first_failed_ms - waited_ms >= bypass_after_ms (waited_ms:   |
|                         | its waits for admission since the first failure), unless held         |
|                         | (core.hold: outage_max_hold_ms of wall time, waits included, from the |
|                         | failure where this rule first held); else retry when due              |
| bypass                  | closes the last window at trunc(end_ms, step_ms) if that is after its |
|                         | start (the frontier restarts there), any other at end_ms              |
| heartbeat, current      | deadline_ms = now + task_timeout_ms                                   |
| nack or heartbeat of an | ignored "stale"                                                       |
|   earlier/failed attempt|                                                                       |
| result of an earlier    | rejected, naming `incarnation` (a result without one counts as the    |
|   incarnation           | current): a delete and re-create must not take the old stream's work  |
| result of a worker of   | rejected, naming both pipelines (a result without one is `default`'s) |
|   another pipeline      |                                                                       |
| result for a window     | ignored "duplicate": its start is before downstream_ms or inside a    |
|   already finished      | finished interval                                                     |
| anything else           | rejected with a reason: unknown stream, never dispatched, bad fields  |
| finished prefix         | downstream_ms moves over it; its intervals go to `unannounced` and    |
|                         | its windows are purged                                                |
| end_ms (bounded stream) | no window starts at or after it, the last one ends there; once        |
|                         | downstream_ms reaches it the stream is finished (finished_ms = now)   |
|                         | until an upsert moves end_ms on                                       |
| delete                  | deleted_ms = now, nothing more is dispatched; windows finished before |
|                         | it stay unannounced for the adapter to announce with the delete (never|
|                         | dropped); results and controls (an upsert re-creates it) are rejected |
|                         | with the reason                                                       |
| finished or deleted     | collected by `advance` (Decision(None)) once gc_grace_ms has passed;  |
|   for gc_grace_ms       | a finished stream's results are rejected with the reason until then   |
| announce (core.announce)| one Commit for all unannounced intervals; announced_ms = downstream_ms|

Time is an argument (`now_ms`). Every function updates the state it is given IN PLACE and returns
it in the Decision: a caller that needs the old state must keep a copy (`state_to_dict`). A rejected
or ignored input leaves the state exactly as it was (every check runs before any mutation), and
every accepted input ends by dispatching whatever is due at `now_ms` and the `gate` admits (every
function that dispatches takes one: streams.core.gate; None, the default, admits everything).
"""

from __future__ import annotations

from streams.core.bypass import bypass_window
from streams.core.config import StreamConfig
from streams.core.gate import Gate
from streams.core.hold import bypass_held, held_ms
from streams.core.model import (
    NACK_WITHOUT_ERROR,
    BypassRecord,
    CommittedWindow,
    Control,
    Decision,
    Delete,
    ErrorInfo,
    Pause,
    Result,
    Resume,
    StreamState,
    Task,
    Upsert,
    Window,
    task_id,
)
from streams.core.results import (
    UNKNOWN_STREAM,
    ended_reason,
    incarnation_of,
    other_owner,
    result_problem,
)
from streams.core.retry import retry_delay_ms
from streams.core.waiting import denied, end_wait, end_waits

# The nack kind of a worker that stopped before finishing a task (streams.worker.api.SHUTDOWN).
SHUTDOWN_KIND = "shutdown"
# The error kind of an attempt whose deadline passed without a result.
TIMEOUT_KIND = "timeout"
# How many shutdown nacks of one window are requeued for free. Workers that really stop give a
# window one or two in a rolling restart; a handler (or a worker of another language) answering
# "shutdown" for its own reasons gave 361 in an hour, never bypassed. Past this many, a shutdown
# nack is a failure like any other: retry delay, max_attempts, bypass_after_ms.
SHUTDOWN_REQUEUES_MAX = 10

NEVER_DISPATCHED = "window was never dispatched"


def create_state(config: StreamConfig, now_ms: int, gate: Gate | None = None) -> Decision:
    """Create a stream at `now_ms`: the same as `apply_control(None, Upsert(config), now_ms)`."""
    return apply_control(None, Upsert(config), now_ms, gate)


def apply_control(
    state: StreamState | None, control: Control, now_ms: int, gate: Gate | None = None
) -> Decision:
    """Apply an Upsert, Pause, Resume or Delete.

    An Upsert of an existing stream replaces its config; `config.start_ms` is then ignored, because
    progress never moves (neither backwards nor forwards) on a config change. The new config applies
    to windows generated afterwards: windows never dispatched are dropped and regenerated, while
    dispatched ones keep their bounds. The paused flag is kept; a stream created paused
    (`Upsert.paused`) dispatches nothing until resumed.
    """
    if type(now_ms) is not int:
        return Decision(state, rejected="now_ms must be an integer")
    if isinstance(control, Upsert):
        config = control.config
        if not isinstance(config, StreamConfig):
            return Decision(state, rejected="config must be a StreamConfig")
        if state is None or state.deleted_ms is not None:
            origin = config.start_ms - config.start_ms % config.step_ms
            incarnation = incarnation_of(config, now_ms)
            state = StreamState(config, origin, origin, origin, incarnation=incarnation)
            state.paused = control.paused is True
        elif config.stream_id != state.config.stream_id:
            return Decision(state, rejected="stream_id does not match the stream")
        else:
            state.config = config
            _drop_undispatched_tail(state)
        return _decide(state, now_ms, gate)
    if not isinstance(control, Pause | Resume | Delete):
        return Decision(state, rejected="unknown control")
    if state is None:
        return Decision(None, rejected=UNKNOWN_STREAM)
    if control.stream_id != state.config.stream_id:
        return Decision(state, rejected="stream_id does not match the stream")
    if state.deleted_ms is not None:
        return Decision(state, rejected=ended_reason(state))
    if isinstance(control, Delete):
        # `unannounced` is kept: those windows were finished downstream before the delete, and
        # the adapter announces them with it, so that what `commits` holds does not depend on
        # whether an announcement or a transaction boundary fell between the ack and the delete.
        state.deleted_ms = now_ms
        state.windows = []
        state.paused = False
        return Decision(state)
    if isinstance(control, Pause) and not state.paused:
        end_waits(state, now_ms)  # a paused stream asks nothing
    state.paused = isinstance(control, Pause)
    return _decide(state, now_ms, gate)


def apply_result(
    state: StreamState | None,
    result: Result,
    now_ms: int,
    max_hold_ms: int = 0,
    gate: Gate | None = None,
) -> Decision:
    """Apply a worker's ack, nack or heartbeat (see the rule table above).

    `max_hold_ms`: how long a time-based bypass may be held (streams.core.hold); 0 unless the
    stream's source is in outage.
    """
    if state is None:
        return Decision(None, rejected=UNKNOWN_STREAM)
    problem = result_problem(result, now_ms)
    if problem is not None:
        return Decision(state, rejected=problem)
    if result.stream_id != state.config.stream_id:
        return Decision(state, rejected="stream_id does not match the stream")
    if state.ended:
        return Decision(state, rejected=ended_reason(state))
    other = other_owner(result, state)
    if other is not None:
        return Decision(state, rejected=other)
    start_ms = result.start_ms
    if start_ms < state.downstream_ms:
        return Decision(state, ignored="duplicate")
    windows = state.windows
    index = -1
    for i, candidate in enumerate(windows):
        for done in candidate.closed:
            if done.start_ms <= start_ms < done.end_ms:
                return Decision(state, ignored="duplicate")
        if candidate.start_ms == start_ms and not candidate.finished:
            index = i
            break
    if index < 0:
        return Decision(state, rejected=NEVER_DISPATCHED)
    window = windows[index]
    if window.end_ms != result.end_ms:
        return Decision(state, rejected=NEVER_DISPATCHED)
    if result.attempt > window.attempt:
        return Decision(state, rejected=f"attempt {result.attempt} was never dispatched")
    outcome = result.outcome
    if outcome == "ack":
        assert result.ack_ms is not None  # checked by result_problem
        _ack(state, window, index, result.ack_ms, now_ms)
        return _decide(state, now_ms, gate)
    if result.attempt < window.attempt or not window.in_flight:
        return Decision(state, ignored="stale")
    if outcome == "heartbeat":
        window.deadline_ms = now_ms + state.config.task_timeout_ms
        return _decide(state, now_ms, gate)
    error = result.error or NACK_WITHOUT_ERROR
    bypass = _fail(state, window, index, error, now_ms, max_hold_ms)
    if bypass is None:
        return _decide(state, now_ms, gate, requeues=1)
    return _decide(state, now_ms, gate, (bypass,))


def advance(
    state: StreamState | None,
    now_ms: int,
    expire: bool = True,
    max_hold_ms: int = 0,
    gate: Gate | None = None,
) -> Decision:
    """The time-driven step: fail every attempt whose deadline passed, then dispatch what is due.

    `expire=False` dispatches without failing any attempt: a new owner that has not yet read the
    results waiting for it must not count its predecessor's downtime against the workers.
    """
    if state is None:
        return Decision(None, rejected=UNKNOWN_STREAM)
    if type(now_ms) is not int:
        return Decision(state, rejected="now_ms must be an integer")
    collect_at_ms = state.collect_at_ms()
    if collect_at_ms is not None:
        if now_ms >= collect_at_ms:
            return Decision(None)  # collected: the stream is forgotten
        if state.deleted_ms is not None:
            return Decision(state)
    if not expire:
        return _decide(state, now_ms, gate)
    timeouts = requeues = 0
    bypasses: list[BypassRecord] = []
    for index, window in enumerate(state.windows):
        deadline_ms = window.deadline_ms
        if window.in_flight and deadline_ms is not None and deadline_ms <= now_ms:
            timeouts += 1
            error = ErrorInfo(TIMEOUT_KIND, f"no result by deadline_ms {deadline_ms}")
            bypass = _fail(state, window, index, error, now_ms, max_hold_ms)
            if bypass is None:
                requeues += 1
            else:
                bypasses.append(bypass)
    return _decide(state, now_ms, gate, tuple(bypasses), timeouts, requeues)


def _ack(state: StreamState, window: Window, index: int, ack_ms: int, now_ms: int) -> None:
    """Finish (start, ack_ms]; what remains of a partially acked window stays to do."""
    # held_ms is called only for a held window: the call cost every ack about 400 instructions,
    # more than the gate's fields and checks add to it (docs/benchmarks.md, issue 29)
    held = None if window.held_since_ms is None else held_ms(window, now_ms)
    window.closed.append(CommittedWindow(window.start_ms, ack_ms, "ack", window.attempt, held))
    is_last = index == len(state.windows) - 1
    window.waiting_since_ms = None  # a late ack of an earlier attempt ends a wait
    if ack_ms == window.end_ms or is_last:
        window.finished = True
        window.in_flight = False
        window.deadline_ms = None
        if is_last:  # a partial ack leaves (ack_ms, end_ms] to the next generated window
            state.frontier_ms = ack_ms
        return
    # A later window already starts at end_ms: the remainder is a fresh window, due at once.
    window.start_ms = ack_ms
    window.due_ms = window.end_ms + state.config.delay_ms
    window.attempt = window.retried_count = window.waited_ms = 0
    window.in_flight = False
    window.dispatched_ms = window.deadline_ms = window.first_failed_ms = None
    window.last_error = window.held_since_ms = None


def _fail(
    state: StreamState, window: Window, index: int, error: ErrorInfo, now_ms: int, max_hold_ms: int
) -> BypassRecord | None:
    """Record a failed attempt; bypass the window if the rule allows, else schedule a retry.

    A worker that stops nacks its unfinished tasks with kind "shutdown": the work was not
    tried, so the window goes out again at once and the retry budget is left as it was, up to
    SHUTDOWN_REQUEUES_MAX times (a window's dispatches that did not fail are its shutdowns:
    `attempt - retried_count`, this one included).
    """
    config = state.config
    window.in_flight = False
    window.deadline_ms = None
    if (
        error.kind == SHUTDOWN_KIND
        and window.attempt - window.retried_count <= SHUTDOWN_REQUEUES_MAX
    ):
        window.due_ms = max(window.end_ms + config.delay_ms, now_ms)
        return None
    window.retried_count += 1
    window.last_error = error
    first_failed_ms = window.first_failed_ms
    if first_failed_ms is None:
        first_failed_ms = window.first_failed_ms = now_ms
    failing_ms = now_ms - first_failed_ms  # the budget spent: waits for admission left out
    if window.waited_ms:
        failing_ms -= window.waited_ms
    max_attempts = config.max_attempts
    if (
        error.kind in config.non_retryable
        or (max_attempts is not None and window.retried_count >= max_attempts)
        or (failing_ms >= config.bypass_after_ms and not bypass_held(window, now_ms, max_hold_ms))
    ):
        return bypass_window(state, window, index, first_failed_ms, now_ms)
    delay_ms = retry_delay_ms(config.retry, config.stream_id, window.start_ms, window.retried_count)
    # max() of the two without its call, about 1,000 instructions per failure: more than the
    # wait's checks add to it (docs/benchmarks.md, issue 29)
    due_ms = now_ms + delay_ms
    earliest_ms = window.end_ms + config.delay_ms
    window.due_ms = due_ms if due_ms > earliest_ms else earliest_ms
    return None


def _drop_undispatched_tail(state: StreamState) -> None:
    """Forget trailing windows never dispatched, so that they are regenerated under a new config."""
    windows = state.windows
    while windows:
        last = windows[-1]
        if last.attempt or last.finished or last.closed:
            return
        windows.pop()
        state.frontier_ms = last.start_ms


def _decide(
    state: StreamState,
    now_ms: int,
    gate: Gate | None,
    bypasses: tuple[BypassRecord, ...] = (),
    timeouts: int = 0,
    requeues: int = 0,
) -> Decision:
    """Settle the finished prefix, generate windows up to the limit and dispatch what is due
    and admitted. The gate sees the state as it stands: windows sent before in this decision
    are in flight."""
    config = state.config
    windows = state.windows
    while windows:
        head = windows[0]
        if head.closed:
            state.unannounced.extend(head.closed)
            state.downstream_ms = head.closed[-1].end_ms
            head.closed = []
        if not head.finished:
            break
        del windows[0]
    last_ms = config.end_ms
    while len(windows) < config.max_in_flight:
        start_ms = state.frontier_ms
        end_ms = start_ms + config.window_ms
        if last_ms is not None:
            if start_ms >= last_ms:
                break
            end_ms = min(end_ms, last_ms)
        windows.append(Window(start_ms, end_ms, end_ms + config.delay_ms))
        state.frontier_ms = end_ms
    if last_ms is not None and not windows and state.downstream_ms >= last_ms:
        if state.finished_ms is None:
            state.finished_ms = now_ms
    elif state.finished_ms is not None:
        state.finished_ms = None  # an upsert moved end_ms on
    if state.paused:
        return Decision(state, (), bypasses, None, None, timeouts, requeues)
    tasks: list[Task] = []
    for window in windows:
        if window.due_ms <= now_ms and not window.in_flight and not window.finished:
            if gate is not None and denied(gate, state, window, now_ms):
                continue
            if window.waiting_since_ms is not None:
                end_wait(window, now_ms)
            attempt = window.attempt = window.attempt + 1
            deadline_ms = now_ms + config.task_timeout_ms
            window.in_flight = True
            window.dispatched_ms = now_ms
            window.deadline_ms = deadline_ms
            start_ms = window.start_ms
            tasks.append(
                Task(
                    task_id(config.stream_id, start_ms, attempt),
                    config.stream_id,
                    start_ms,
                    window.end_ms,
                    config.step_ms,
                    attempt,
                    now_ms,
                    deadline_ms,
                    config.params,
                    False,
                    state.incarnation,
                    config.pipeline,
                )
            )
    return Decision(state, tuple(tasks), bypasses, None, None, timeouts, requeues)
