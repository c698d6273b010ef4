"""The seed's three worked examples, with their exact timestamps (2026-11-29, UTC)."""

from streams.core import ErrorInfo, advance, announce, apply_result, next_due_ms

from .helpers import ack, at, bounds, nack, only, started


def test_a_an_ack_commits_the_window_and_the_next_window_follows() -> None:
    state, tasks = started(at(10, 1), window_ms=60_000, step_ms=15_000)
    (task,) = tasks
    assert task.task_id == f"cluster-a/{at(10, 0)}/1"
    assert (task.start_ms, task.end_ms, task.step_ms) == (at(10, 0), at(10, 1), 15_000)
    assert (task.dispatched_ms, task.deadline_ms) == (at(10, 1), at(10, 2))

    decision = apply_result(state, ack(task, at(10, 1)), at(10, 1))

    assert decision.rejected is None and decision.ignored is None
    assert state.downstream_ms == at(10, 1)
    assert decision.tasks == ()  # (10:01, 10:02] is not due before 10:02
    assert bounds(state) == [(at(10, 1), at(10, 2))]
    _, commit = announce(state, at(10, 1))
    assert commit is not None
    assert commit.to_wire() == {
        "stream_id": "cluster-a",
        "downstream_ms": at(10, 1),
        "previous_ms": at(10, 0),
        "committed_ms": at(10, 1),
        "windows": [{"start_ms": at(10, 0), "end_ms": at(10, 1), "reason": "ack", "attempts": 1}],
    }
    assert next_due_ms(state) == at(10, 2)
    following = only(advance(state, at(10, 2)))
    assert (following.start_ms, following.end_ms, following.attempt) == (at(10, 1), at(10, 2), 1)


def test_b_a_window_nacked_every_time_is_bypassed_five_minutes_after_its_first_failure() -> None:
    state, (task,) = started(at(10, 1))  # fixed 60 s retries, bypass after 300 s by default

    first = apply_result(state, nack(task, "no_data"), at(10, 1, 5))
    assert first.requeues == 1 and first.bypasses == () and first.tasks == ()
    assert state.windows[0].first_failed_ms == at(10, 1, 5)
    assert next_due_ms(state) == at(10, 2, 5)

    retried_at = []
    for minute in range(2, 7):  # retries at 10:02:05 ... 10:06:05, each nacked at once
        assert advance(state, at(10, minute, 4)).tasks == ()
        retry = only(advance(state, at(10, minute, 5)))
        retried_at.append(retry.dispatched_ms)
        assert (retry.start_ms, retry.end_ms, retry.attempt) == (at(10, 0), at(10, 1), minute)
        decision = apply_result(state, nack(retry, "no_data"), at(10, minute, 5))
        if minute < 6:
            assert decision.requeues == 1 and decision.bypasses == ()
            assert state.downstream_ms == at(10, 0)

    assert retried_at == [at(10, m, 5) for m in range(2, 7)]
    (bypass,) = decision.bypasses
    assert bypass.to_wire() == {
        "stream_id": "cluster-a",
        "start_ms": at(10, 0),
        "end_ms": at(10, 1),
        "attempts": 6,
        "first_failed_ms": at(10, 1, 5),
        "bypassed_ms": at(10, 6, 5),
        "last_error": {"kind": "no_data", "message": f"no_data in cluster-a/{at(10, 0)}/6"},
    }
    assert bypass.key == f"cluster-a/{at(10, 0)}"
    assert state.downstream_ms == at(10, 1)
    following = only(decision)  # (10:01, 10:02] is long due: dispatched in the same decision
    assert (following.start_ms, following.end_ms, following.attempt) == (at(10, 1), at(10, 2), 1)
    _, commit = announce(state, at(10, 6, 5))
    assert commit is not None
    assert [w.to_wire() for w in commit.windows] == [
        {"start_ms": at(10, 0), "end_ms": at(10, 1), "reason": "bypass", "attempts": 6}
    ]


def test_c_a_core_metric_nack_requeues_the_same_window_and_commits_nothing() -> None:
    state, (task,) = started(at(10, 1))

    decision = apply_result(state, nack(task, "core_metric"), at(10, 1, 5))

    assert decision.requeues == 1 and decision.bypasses == () and decision.tasks == ()
    assert state.downstream_ms == at(10, 0)
    assert state.unannounced == []
    assert announce(state, at(10, 1, 5)) == (state, None)
    (window,) = state.windows
    assert window.last_error == ErrorInfo("core_metric", f"core_metric in {task.task_id}")
    assert (window.retried_count, window.in_flight, window.due_ms) == (1, False, at(10, 2, 5))
    retry = only(advance(state, at(10, 2, 5)))
    assert (retry.start_ms, retry.end_ms, retry.attempt) == (task.start_ms, task.end_ms, 2)
    assert retry.task_id == f"cluster-a/{at(10, 0)}/2"
