"""Property tests of the outage guard: a hold only ever postpones the seed's time-based bypass.

1. One window failing at random times, in and out of outage: the guard bypasses exactly where
   its rule says, never before the seed's rule would (a run without any outage), and at the same
   failure when the reason is a non-retryable kind or max_attempts.
2. Random interleavings of results, timeouts, outages and recoveries over several windows: every
   bypass is one the seed's rule allows at that time, a time-based bypass in outage waits for
   outage_max_hold_ms, holds start only in outage, recovery sends every waiting held window out,
   a closed window carries held_ms exactly when it was held, and the state reads back.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from streams.core import (
    Decision,
    ErrorInfo,
    Fixed,
    Immediate,
    Result,
    StreamConfig,
    StreamState,
    Task,
    advance,
    announce,
    apply_result,
    create_state,
    is_failing,
    release,
    state_from_dict,
    state_from_row,
    state_to_dict,
    state_to_row,
)

from .helpers import T0

KINDS = ("no_data", "no_data", "timeout_like", "bad_query")


def _nack(task: Task, kind: str) -> Result:
    error = ErrorInfo(kind, "from the property test")
    return Result(task.stream_id, task.start_ms, task.end_ms, task.attempt, "nack", error=error)


def _run(
    config: StreamConfig, failures: list[tuple[int, str, int]]
) -> tuple[int | None, StreamState]:
    """Nack the first window at each (time, kind, max_hold_ms); the index of its bypass, if any."""
    created = create_state(config, T0)
    state = created.state
    assert state is not None
    (task,) = created.tasks
    for index, (now_ms, kind, hold_ms) in enumerate(failures):
        decision = apply_result(state, _nack(task, kind), now_ms, hold_ms)
        if decision.bypasses:
            return index, state
        (task,) = decision.tasks  # Immediate: the retry goes out with the failure
    return None, state


def _expected(config: StreamConfig, failures: list[tuple[int, str, int]]) -> int | None:
    """The guard's rule, written out on its own: where the window is bypassed."""
    first_ms = failures[0][0] if failures else 0
    held_since: int | None = None
    for index, (now_ms, kind, hold_ms) in enumerate(failures):
        limit = config.max_attempts
        if kind in config.non_retryable or (limit is not None and index + 1 >= limit):
            return index
        if now_ms - first_ms < config.bypass_after_ms:
            continue
        if held_since is None and hold_ms > 0:
            held_since = now_ms
        if held_since is None or now_ms - held_since >= hold_ms:
            return index
    return None


@settings(max_examples=400, deadline=None)
@given(
    bypass_after_ms=st.sampled_from([1, 20_000, 120_000, 300_000]),
    max_attempts=st.none() | st.integers(1, 12),
    non_retryable=st.sampled_from([frozenset(), frozenset({"bad_query"})]),
    max_hold_ms=st.sampled_from([0, 1, 30_000, 300_000, 21_600_000]),
    steps=st.lists(
        st.tuples(st.integers(0, 90_000), st.sampled_from(KINDS), st.booleans()),
        min_size=1,
        max_size=40,
    ),
)
def test_a_hold_bypasses_where_its_rule_says_and_never_before_the_seed(
    bypass_after_ms: int,
    max_attempts: int | None,
    non_retryable: frozenset[str],
    max_hold_ms: int,
    steps: list[tuple[int, str, bool]],
) -> None:
    config = StreamConfig(
        "s",
        T0 - 60_000,
        retry=Immediate(),
        bypass_after_ms=bypass_after_ms,
        max_attempts=max_attempts,
        non_retryable=non_retryable,
    )
    now_ms = T0
    held: list[tuple[int, str, int]] = []
    for gap_ms, kind, outage in steps:
        now_ms += gap_ms
        held.append((now_ms, kind, max_hold_ms if outage else 0))
    seed = [(t, kind, 0) for t, kind, _ in held]

    seed_index, _ = _run(config, seed)
    held_index, state = _run(config, held)

    assert held_index == _expected(config, held)
    assert seed_index == _expected(config, seed)
    if seed_index is None:
        assert held_index is None, "a hold bypassed a window the seed's rule keeps"
        return
    assert held_index is None or held_index >= seed_index, "a hold made a bypass earlier"
    seed_time_ms, seed_kind, hold_at_seed = held[seed_index]
    if seed_kind in non_retryable or (max_attempts is not None and seed_index + 1 >= max_attempts):
        assert held_index == seed_index, "a hold held a non-retryable or max_attempts bypass"
    if held_index != seed_index:
        event("held past the seed's bypass")
        assert hold_at_seed > 0
        window = state.windows[0] if held_index is None else None
        if window is not None:
            assert window.held_since_ms == seed_time_ms
    elif held_index is not None and hold_at_seed > 0 and max_hold_ms > 0:
        event("in outage at the seed's bypass, bypassed anyway")


def _tasks_of(decision: Decision, outstanding: dict[tuple[int, int], Task]) -> None:
    for task in decision.tasks:
        outstanding[(task.start_ms, task.attempt)] = task


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data(), steps=st.integers(5, 80))
def test_random_outages_keep_the_guards_invariants(data: st.DataObject, steps: int) -> None:
    config = StreamConfig(
        "s",
        T0 - 600_000,
        window_ms=60_000,
        step_ms=15_000,
        task_timeout_ms=data.draw(st.sampled_from([5_000, 60_000])),
        bypass_after_ms=data.draw(st.sampled_from([1, 20_000, 120_000])),
        retry=data.draw(st.sampled_from([Immediate(), Fixed(1_000), Fixed(30_000)])),
        max_attempts=data.draw(st.none() | st.integers(1, 10)),
        non_retryable=frozenset({"bad_query"}),
        max_in_flight=data.draw(st.integers(1, 4)),
    )
    max_hold_ms = data.draw(st.sampled_from([0, 1, 60_000, 600_000]))
    now_ms = T0
    created = create_state(config, now_ms)
    state = created.state
    assert state is not None
    outstanding: dict[tuple[int, int], Task] = {}
    _tasks_of(created, outstanding)
    held_before: dict[int, int] = {}

    for _ in range(steps):
        now_ms += data.draw(st.sampled_from([0, 1, 1_000, 15_000, 60_000, 300_000]))
        outage = data.draw(st.booleans())
        hold_ms = max_hold_ms if outage else 0
        held_before = {w.start_ms: w.held_since_ms for w in state.windows if w.held_since_ms}
        first_failed = {w.start_ms: w.first_failed_ms for w in state.windows}
        op = data.draw(st.sampled_from(["ack", "nack", "nack", "advance", "release"]))
        if op == "release":
            decision = release(state, now_ms)
            for w in state.windows:
                if w.held_since_ms is not None and not w.finished:
                    assert w.in_flight, "a held window waits after its source recovered"
        elif op == "advance":
            decision = advance(state, now_ms, max_hold_ms=hold_ms)
        elif outstanding:
            key = data.draw(st.sampled_from(sorted(outstanding)))
            task = outstanding[key]
            if op == "ack":
                result = Result("s", task.start_ms, task.end_ms, task.attempt, "ack", task.end_ms)
            else:
                result = _nack(task, data.draw(st.sampled_from(KINDS)))
            decision = apply_result(state, result, now_ms, hold_ms)
        else:
            continue
        _tasks_of(decision, outstanding)

        for bypass in decision.bypasses:
            kind = bypass.last_error.kind if bypass.last_error else ""
            limit = config.max_attempts
            other = kind in config.non_retryable or (limit is not None and bypass.attempts >= limit)
            assert other or now_ms - bypass.first_failed_ms >= config.bypass_after_ms
            since = held_before.get(bypass.start_ms)
            if not other and hold_ms > 0:
                # in outage, a time-based bypass waits for the hold to run out
                assert since is not None and now_ms - since >= hold_ms
        for window in state.windows:
            since = window.held_since_ms
            if since is None or window.finished:
                continue
            assert window.first_failed_ms is not None and is_failing(state)
            if held_before.get(window.start_ms) is None:  # a hold started by this decision
                assert outage and max_hold_ms > 0 and since == now_ms
                assert first_failed.get(window.start_ms) is not None  # it had failed before
        for done in [*state.unannounced, *(d for w in state.windows for d in w.closed)]:
            assert done.held_ms is None or done.held_ms >= 0
        assert state_from_dict(json.loads(json.dumps(state_to_dict(state)))) == state
        assert state_from_row(json.loads(json.dumps(state_to_row(state)))) == state
        _, commit = announce(state, now_ms)
        if commit is not None:
            for done in commit.windows:
                if done.held_ms is not None:
                    event(f"{done.reason} after a hold")
                    assert max_hold_ms > 0
