"""Results and failures: timeouts, heartbeats, stale, duplicate and unknown results, bypasses."""

from typing import Any

import pytest

from streams.core import (
    ErrorInfo,
    Exponential,
    Immediate,
    Result,
    advance,
    apply_result,
    next_due_ms,
    retry_delay_ms,
)

from .helpers import MINUTE_MS, SECOND_MS, ack, at, bounds, heartbeat, nack, only, snapshot, started


def test_no_result_by_the_deadline_is_a_timeout_failure() -> None:
    state, (task,) = started(at(10, 1))
    assert next_due_ms(state) == task.deadline_ms == at(10, 2)
    assert advance(state, at(10, 2) - 1).timeouts == 0

    decision = advance(state, at(10, 2))

    assert (decision.timeouts, decision.requeues, decision.tasks) == (1, 1, ())
    (window,) = state.windows
    assert window.last_error is not None and window.last_error.kind == "timeout"
    assert (window.first_failed_ms, window.retried_count, window.in_flight) == (at(10, 2), 1, False)
    assert next_due_ms(state) == at(10, 3)  # fixed 60 s after the failure
    assert only(advance(state, at(10, 3))).attempt == 2


def test_a_late_ack_of_a_timed_out_attempt_is_accepted() -> None:
    state, (task,) = started(at(10, 1))
    advance(state, at(10, 2))  # attempt 1 timed out, waiting for its retry

    decision = apply_result(state, ack(task), at(10, 2, 30))

    assert decision.rejected is None and decision.ignored is None
    assert state.downstream_ms == at(10, 1)
    assert state.unannounced[0].attempts == 1


def test_an_ack_from_an_earlier_attempt_is_accepted_while_a_later_one_runs() -> None:
    state, (first,) = started(at(10, 1), retry=Immediate())
    second = only(apply_result(state, nack(first), at(10, 1, 1)))
    assert second.attempt == 2

    decision = apply_result(state, ack(first), at(10, 1, 2))

    assert state.downstream_ms == at(10, 1)
    assert state.unannounced[0].reason == "ack" and state.unannounced[0].attempts == 2
    assert decision.ignored is None
    assert apply_result(state, ack(second), at(10, 1, 3)).ignored == "duplicate"


def test_a_timeout_bypasses_when_max_attempts_have_failed() -> None:
    state, (task,) = started(at(10, 1), max_attempts=1)
    decision = advance(state, task.deadline_ms)
    assert decision.timeouts == 1 and decision.requeues == 0
    (bypass,) = decision.bypasses
    assert bypass.last_error is not None and bypass.last_error.kind == "timeout"
    assert (bypass.attempts, bypass.first_failed_ms) == (1, task.deadline_ms)


def test_a_heartbeat_moves_the_deadline_of_the_current_attempt() -> None:
    state, (task,) = started(at(10, 1))

    decision = apply_result(state, heartbeat(task), at(10, 1, 50))

    assert decision.ignored is None and decision.rejected is None
    assert state.windows[0].deadline_ms == at(10, 2, 50)
    assert next_due_ms(state) == at(10, 2, 50)
    assert advance(state, at(10, 2)).timeouts == 0
    assert advance(state, at(10, 2, 50)).timeouts == 1


def test_a_heartbeat_or_nack_from_an_earlier_attempt_is_stale() -> None:
    state, (first,) = started(at(10, 1), retry=Immediate())
    only(apply_result(state, nack(first), at(10, 1, 1)))
    before = snapshot(state)

    assert apply_result(state, heartbeat(first), at(10, 1, 2)).ignored == "stale"
    assert apply_result(state, nack(first), at(10, 1, 2)).ignored == "stale"
    assert snapshot(state) == before


def test_a_nack_for_an_attempt_that_already_timed_out_is_stale() -> None:
    state, (task,) = started(at(10, 1))
    advance(state, at(10, 2))
    before = snapshot(state)
    assert apply_result(state, nack(task), at(10, 2, 1)).ignored == "stale"
    assert apply_result(state, heartbeat(task), at(10, 2, 1)).ignored == "stale"
    assert snapshot(state) == before


def test_results_for_a_committed_window_are_duplicates() -> None:
    state, (task,) = started(at(10, 1))
    apply_result(state, ack(task), at(10, 1))
    before = snapshot(state)
    for result in (ack(task), ack(task, at(10, 0, 30)), nack(task), heartbeat(task)):
        decision = apply_result(state, result, at(10, 1, 1))
        assert (decision.ignored, decision.rejected, decision.tasks) == ("duplicate", None, ())
    assert snapshot(state) == before


def test_ignored_and_rejected_results_dispatch_nothing_even_when_something_is_due() -> None:
    state, (first,) = started(at(10, 1))
    apply_result(state, nack(first), at(10, 1))
    second = only(advance(state, at(10, 2)))
    apply_result(state, nack(second), at(10, 2))  # the retry is due at 10:03
    before = snapshot(state)
    assert apply_result(state, heartbeat(first), at(10, 5)).tasks == ()
    assert apply_result(state, nack(second, attempt=9), at(10, 5)).tasks == ()
    assert snapshot(state) == before
    assert only(advance(state, at(10, 5))).attempt == 3


def test_a_result_for_an_unknown_stream_is_rejected() -> None:
    state, (task,) = started(at(10, 1))
    decision = apply_result(None, ack(task), at(10, 1))
    assert (decision.state, decision.rejected) == (None, "unknown stream")
    other = Result("cluster-b", task.start_ms, task.end_ms, 1, "ack", task.end_ms)
    assert apply_result(state, other, at(10, 1)).rejected == "stream_id does not match the stream"


def test_results_for_windows_never_dispatched_are_rejected() -> None:
    state, (task,) = started(at(10, 1))
    before = snapshot(state)
    next_window = Result("cluster-a", at(10, 1), at(10, 2), 1, "ack", at(10, 2))
    wrong_end = Result("cluster-a", at(10, 0), at(10, 2), 1, "nack")
    elsewhere = Result("cluster-a", at(11, 0), at(11, 1), 1, "heartbeat")
    for result in (next_window, wrong_end, elsewhere):
        assert apply_result(state, result, at(10, 1)).rejected == "window was never dispatched"
    assert apply_result(state, ack(task, attempt=2), at(10, 1)).rejected == (
        "attempt 2 was never dispatched"
    )
    apply_result(state, ack(task), at(10, 1))
    generated = Result("cluster-a", at(10, 1), at(10, 2), 1, "ack", at(10, 2))  # not yet due
    assert apply_result(state, generated, at(10, 1)).rejected == "attempt 1 was never dispatched"
    assert bounds(state) == [(at(10, 1), at(10, 2))]
    assert before != snapshot(state)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"ack_ms": None}, "ack_ms None must satisfy start_ms < ack_ms <= end_ms"),
        ({"ack_ms": at(10, 0)}, "must satisfy start_ms < ack_ms <= end_ms"),
        ({"ack_ms": at(10, 1) + 1}, "must satisfy start_ms < ack_ms <= end_ms"),
        ({"ack_ms": float(at(10, 1))}, "ack_ms"),
        ({"attempt": 0}, "attempt must be >= 1"),
        ({"attempt": True}, "must be integers"),
        ({"start_ms": at(10, 1)}, "start_ms must be before end_ms"),
        ({"outcome": "done"}, "unknown outcome 'done'"),
        ({"error": "boom"}, "error must be an ErrorInfo"),
    ],
)
def test_malformed_results_are_rejected_with_a_reason(changes: dict[str, Any], reason: str) -> None:
    state, (task,) = started(at(10, 1))
    before = snapshot(state)
    fields: dict[str, Any] = {
        "stream_id": "cluster-a",
        "start_ms": task.start_ms,
        "end_ms": task.end_ms,
        "attempt": 1,
        "outcome": "ack",
        "ack_ms": task.end_ms,
    }
    decision = apply_result(state, Result(**(fields | changes)), at(10, 1))
    assert decision.rejected is not None and reason in decision.rejected
    assert snapshot(state) == before


def test_a_non_integer_clock_is_rejected() -> None:
    state, (task,) = started(at(10, 1))
    assert apply_result(state, ack(task), 1.5).rejected == "now_ms must be an integer"  # type: ignore[arg-type]
    assert advance(state, None).rejected == "now_ms must be an integer"  # type: ignore[arg-type]


def test_max_attempts_bypasses_once_that_many_attempts_failed() -> None:
    state, (task,) = started(at(10, 1), max_attempts=3, retry=Immediate())
    for attempt in (1, 2):
        decision = apply_result(state, nack(task), at(10, 1, attempt))
        assert decision.bypasses == () and decision.requeues == 1
        task = only(decision)
        assert task.attempt == attempt + 1
    decision = apply_result(state, nack(task), at(10, 1, 3))
    (bypass,) = decision.bypasses
    assert bypass.attempts == 3 and decision.requeues == 0
    assert state.downstream_ms == at(10, 1)


def test_a_non_retryable_error_kind_bypasses_at_once() -> None:
    state, (task,) = started(at(10, 1), non_retryable=frozenset({"bad_query"}))
    decision = apply_result(state, nack(task, "bad_query"), at(10, 1, 1))
    (bypass,) = decision.bypasses
    assert (bypass.attempts, bypass.first_failed_ms, bypass.bypassed_ms) == (
        1,
        at(10, 1, 1),
        at(10, 1, 1),
    )
    assert state.downstream_ms == at(10, 1)


def test_the_bypass_budget_is_counted_from_the_first_failure() -> None:
    state, (task,) = started(at(10, 1), retry=Immediate(), bypass_after_ms=10 * SECOND_MS)
    first_failed_ms = at(10, 1, 1)
    task = only(apply_result(state, nack(task), first_failed_ms))
    task = only(apply_result(state, nack(task), first_failed_ms + 10 * SECOND_MS - 1))
    decision = apply_result(state, nack(task), first_failed_ms + 10 * SECOND_MS)
    assert len(decision.bypasses) == 1 and decision.bypasses[0].attempts == 3


def test_a_nack_without_an_error_counts_as_kind_unknown() -> None:
    state, (task,) = started(at(10, 1))
    apply_result(state, Result("cluster-a", task.start_ms, task.end_ms, 1, "nack"), at(10, 1))
    assert state.windows[0].last_error == ErrorInfo("unknown", "nack without an error")


def test_retries_follow_the_exponential_policy_but_never_before_the_window_is_due() -> None:
    policy = Exponential(initial_ms=10 * SECOND_MS, multiplier=3.0, max_ms=MINUTE_MS, jitter=0.2)
    state, (task,) = started(at(10, 1), retry=policy, delay_ms=0)
    now_ms = at(10, 1)
    for failures in range(1, 6):
        apply_result(state, nack(task), now_ms)
        wait_ms = retry_delay_ms(policy, "cluster-a", task.start_ms, failures)
        assert next_due_ms(state) == now_ms + wait_ms
        assert advance(state, now_ms + wait_ms - 1).tasks == ()
        now_ms += wait_ms
        task = only(advance(state, now_ms))


def test_bypassing_the_last_window_closes_it_at_its_end_truncated_to_step() -> None:
    state, (task,) = started(at(10, 1), retry=Immediate(), max_attempts=1)
    apply_result(state, ack(task, at(10, 0, 40)), at(10, 1))  # partial ack: not step-aligned
    assert bounds(state) == [(at(10, 0, 40), at(10, 1, 40))]
    task = only(advance(state, at(10, 1, 40)))

    decision = apply_result(state, nack(task), at(10, 1, 41))

    (bypass,) = decision.bypasses
    assert (bypass.start_ms, bypass.end_ms) == (at(10, 0, 40), at(10, 1, 30))
    assert state.downstream_ms == at(10, 1, 30)
    assert bounds(state) == [(at(10, 1, 30), at(10, 2, 30))]
    assert [(w.start_ms, w.end_ms, w.reason) for w in state.unannounced] == [
        (at(10, 0), at(10, 0, 40), "ack"),
        (at(10, 0, 40), at(10, 1, 30), "bypass"),
    ]
    assert apply_result(state, ack(task), at(10, 1, 42)).ignored == "duplicate"


def test_a_shutdown_nack_requeues_at_once_without_spending_the_budget() -> None:
    from streams.core import ErrorInfo, Result, StreamConfig, apply_result, create_state
    from streams.core.retry import Fixed

    t0 = 1_795_946_400_000
    config = StreamConfig("s", t0, retry=Fixed(60_000), max_attempts=2)
    state = create_state(config, t0 + 60_000).state
    assert state is not None
    shutdown = ErrorInfo("shutdown", "worker stopping")
    for attempt in (1, 2, 3):  # more than max_attempts: none of them counts
        d = apply_result(state, Result("s", t0, t0 + 60_000, attempt, "nack", error=shutdown),
                         t0 + 61_000 + attempt)  # fmt: skip
        assert [t.attempt for t in d.tasks] == [attempt + 1]  # at once, not after 60 s
        assert d.bypasses == ()
    window = state.windows[0]
    assert (window.retried_count, window.first_failed_ms) == (0, None)


def test_shutdown_nacks_past_the_free_ones_are_failures_so_the_window_is_bypassed() -> None:
    """Issue 25, defect 11: a handler (or any worker on the wire) that only ever answers
    `shutdown` had its window requeued at once forever (361 attempts in an hour, despite
    max_attempts 3). A window's first SHUTDOWN_REQUEUES_MAX shutdown nacks are free; later ones
    count as failures, with their retry delay and the bypass budget."""
    from streams.core import StreamConfig, apply_result, create_state
    from streams.core.lifecycle import SHUTDOWN_REQUEUES_MAX
    from streams.core.retry import Fixed

    t0 = 1_795_946_400_000
    config = StreamConfig("s", t0, retry=Fixed(60_000), max_attempts=2)
    state = create_state(config, t0 + 60_000).state
    assert state is not None
    shutdown = ErrorInfo("shutdown", "the handler said so")
    now_ms = t0 + 61_000
    for attempt in range(1, SHUTDOWN_REQUEUES_MAX + 1):  # free: requeued at once
        now_ms += 1
        d = apply_result(state, Result("s", t0, t0 + 60_000, attempt, "nack", error=shutdown),
                         now_ms)  # fmt: skip
        assert [t.attempt for t in d.tasks] == [attempt + 1]
    (window,) = state.windows
    assert (window.retried_count, window.first_failed_ms) == (0, None)

    attempt = SHUTDOWN_REQUEUES_MAX + 1
    d = apply_result(state, Result("s", t0, t0 + 60_000, attempt, "nack", error=shutdown),
                     now_ms + 1)  # fmt: skip
    assert (d.tasks, d.requeues) == ((), 1)  # a failure: retried after its 60 s
    assert (window.retried_count, window.first_failed_ms) == (1, now_ms + 1)
    assert window.last_error == shutdown
    task = only(advance(state, now_ms + 1 + 60_000))
    d = apply_result(state, Result("s", t0, t0 + 60_000, task.attempt, "nack", error=shutdown),
                     now_ms + 60_002)  # fmt: skip
    (bypass,) = d.bypasses  # max_attempts 2: bypassed
    assert bypass.attempts == 2 and bypass.last_error == shutdown
