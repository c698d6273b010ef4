"""Several windows in flight, partial acks, stream control, flushing and the next due time."""

from streams.core import (
    Delete,
    Immediate,
    Pause,
    Resume,
    Upsert,
    advance,
    announce,
    apply_control,
    apply_result,
    create_state,
    next_due_ms,
)
from streams.core.retention import scavenge_due_ms

from .helpers import MINUTE_MS, ack, at, bounds, config, nack, only, snapshot, started


def test_a_partial_ack_with_one_window_in_flight_restarts_from_ack_ms() -> None:
    state, (task,) = started(at(10, 1))

    decision = apply_result(state, ack(task, at(10, 0, 45)), at(10, 1))

    assert state.downstream_ms == at(10, 0, 45)
    assert bounds(state) == [(at(10, 0, 45), at(10, 1, 45))]  # a fresh window of window_ms
    assert decision.tasks == ()
    following = only(advance(state, at(10, 1, 45)))
    assert (following.start_ms, following.attempt) == (at(10, 0, 45), 1)


def test_a_stream_catching_up_dispatches_the_next_window_on_every_ack() -> None:
    state, (task,) = started(at(10, 5))
    for minute in range(1, 5):
        task = only(apply_result(state, ack(task), at(10, 5)))
        assert (task.start_ms, task.end_ms) == (at(10, minute), at(10, minute + 1))
    assert state.downstream_ms == at(10, 4)


def test_several_windows_in_flight_advance_only_over_the_finished_prefix() -> None:
    state, tasks = started(at(10, 5), max_in_flight=3)
    first, second, third = tasks
    assert [(t.start_ms, t.end_ms) for t in tasks] == [
        (at(10, m), at(10, m + 1)) for m in (0, 1, 2)
    ]

    assert apply_result(state, ack(second), at(10, 5)).tasks == ()
    assert state.downstream_ms == at(10, 0)
    assert len(state.windows) == 3  # the finished second window still counts toward the limit
    assert apply_result(state, ack(second), at(10, 5)).ignored == "duplicate"

    decision = apply_result(state, ack(first), at(10, 5))

    assert state.downstream_ms == at(10, 2)
    assert [(t.start_ms, t.end_ms) for t in decision.tasks] == [
        (at(10, 3), at(10, 4)),
        (at(10, 4), at(10, 5)),
    ]
    assert bounds(state) == [(at(10, m), at(10, m + 1)) for m in (2, 3, 4)]
    _, commit = announce(state, at(10, 5))
    assert commit is not None
    assert [(w.start_ms, w.end_ms) for w in commit.windows] == [
        (at(10, 0), at(10, 1)),
        (at(10, 1), at(10, 2)),
    ]
    assert third.start_ms == state.downstream_ms


def test_each_window_in_flight_is_retried_and_bypassed_on_its_own() -> None:
    state, (first, second) = started(at(10, 5), max_in_flight=2, max_attempts=2, retry=Immediate())
    retry_second = only(apply_result(state, nack(second), at(10, 5)))
    assert (retry_second.start_ms, retry_second.attempt) == (second.start_ms, 2)
    retry_first = only(apply_result(state, nack(first), at(10, 5)))
    assert (retry_first.start_ms, retry_first.attempt) == (first.start_ms, 2)

    decision = apply_result(state, nack(retry_first), at(10, 5))

    (bypass,) = decision.bypasses
    assert (bypass.start_ms, bypass.end_ms) == (at(10, 0), at(10, 1))  # not last: closes at end
    assert state.downstream_ms == at(10, 1)
    assert (state.windows[0].start_ms, state.windows[0].retried_count) == (at(10, 1), 1)
    assert (only(decision).start_ms, only(decision).end_ms) == (at(10, 2), at(10, 3))


def test_a_partial_ack_of_an_earlier_window_leaves_its_remainder_to_finish_first() -> None:
    state, (first, second, third) = started(at(10, 5), max_in_flight=3)

    decision = apply_result(state, ack(second, at(10, 1, 30)), at(10, 5))

    remainder = only(decision)  # due at once: its end passed long ago
    assert (remainder.start_ms, remainder.end_ms, remainder.attempt) == (
        at(10, 1, 30),
        at(10, 2),
        1,
    )
    assert remainder.task_id == f"cluster-a/{at(10, 1, 30)}/1"
    assert len(state.windows) == 3
    assert apply_result(state, nack(second), at(10, 5)).ignored == "duplicate"

    apply_result(state, ack(third), at(10, 5))
    apply_result(state, ack(first), at(10, 5))
    assert state.downstream_ms == at(10, 1, 30)  # blocked by the remainder
    apply_result(state, ack(remainder), at(10, 5))
    assert state.downstream_ms == at(10, 3)
    assert [(w.start_ms, w.end_ms) for w in state.unannounced] == [
        (at(10, 0), at(10, 1)),
        (at(10, 1), at(10, 1, 30)),
        (at(10, 1, 30), at(10, 2)),
        (at(10, 2), at(10, 3)),
    ]


def test_a_partial_ack_of_the_last_window_in_flight_moves_the_frontier() -> None:
    state, (first, second) = started(at(10, 5), max_in_flight=2)
    apply_result(state, ack(second, at(10, 1, 15)), at(10, 5))
    assert state.frontier_ms == at(10, 1, 15)
    assert bounds(state) == [(at(10, 0), at(10, 1)), (at(10, 1), at(10, 2))]
    decision = apply_result(state, ack(first), at(10, 5))
    assert state.downstream_ms == at(10, 1, 15)
    assert [(t.start_ms, t.end_ms) for t in decision.tasks] == [
        (at(10, 1, 15), at(10, 2, 15)),
        (at(10, 2, 15), at(10, 3, 15)),
    ]


def test_nothing_is_dispatched_before_end_plus_delay() -> None:
    state, tasks = started(at(10, 1), delay_ms=30_000)
    assert tasks == ()
    assert next_due_ms(state) == at(10, 1, 30)
    assert advance(state, at(10, 1, 29)).tasks == ()
    assert only(advance(state, at(10, 1, 30))).end_ms == at(10, 1)


def test_creation_truncates_start_ms_to_step() -> None:
    decision = create_state(config(start_ms=at(10, 0, 20)), at(10, 0, 20))
    assert decision.state is not None
    assert decision.state.downstream_ms == decision.state.announced_ms == at(10, 0, 15)
    assert bounds(decision.state) == [(at(10, 0, 15), at(10, 1, 15))]
    assert decision == apply_control(None, Upsert(config(start_ms=at(10, 0, 20))), at(10, 0, 20))


def test_pause_stops_dispatch_but_results_and_deadlines_are_still_processed() -> None:
    state, (task,) = started(at(10, 1), retry=Immediate())
    assert apply_control(state, Pause("cluster-a"), at(10, 1)).tasks == ()
    assert state.paused

    decision = advance(state, at(10, 2))
    assert (decision.timeouts, decision.requeues, decision.tasks) == (1, 1, ())
    assert next_due_ms(state) is None  # paused and nothing in flight
    assert apply_result(state, ack(task), at(10, 2, 1)).tasks == ()
    assert state.downstream_ms == at(10, 1)
    assert advance(state, at(10, 9)).tasks == ()

    decision = apply_control(state, Resume("cluster-a"), at(10, 9))
    assert not state.paused
    assert (only(decision).start_ms, only(decision).end_ms) == (at(10, 1), at(10, 2))


def test_a_stream_created_paused_dispatches_nothing_until_resumed() -> None:
    decision = apply_control(None, Upsert(config(), paused=True), at(10, 5))
    state = decision.state
    assert state is not None and state.paused and decision.tasks == ()
    assert advance(state, at(10, 9)).tasks == () and next_due_ms(state) is None
    # An upsert of the existing stream keeps its flag, whatever it says.
    apply_control(state, Upsert(config(window_ms=120_000, step_ms=60_000)), at(10, 9))
    assert state.paused
    resumed = apply_control(state, Resume("cluster-a"), at(10, 9))
    assert not state.paused and resumed.tasks
    assert apply_control(state, Upsert(config(), paused=True), at(10, 9)).rejected is None
    assert not state.paused  # paused only applies on creation


def test_pause_and_resume_are_idempotent() -> None:
    state, _ = started(at(10, 0))
    apply_control(state, Pause("cluster-a"), at(10, 0))
    assert apply_control(state, Pause("cluster-a"), at(10, 0)).rejected is None
    apply_control(state, Resume("cluster-a"), at(10, 0))
    assert apply_control(state, Resume("cluster-a"), at(10, 0)).rejected is None


def test_delete_keeps_the_stream_until_gc_grace_and_later_inputs_are_rejected() -> None:
    state, (task,) = started(at(10, 1))
    deleted = apply_control(state, Delete("cluster-a"), at(10, 1)).state
    assert deleted is state and state.deleted_ms == at(10, 1) and state.windows == []
    kept_until = at(10, 1) + 48 * 3_600_000
    for control in (Pause("cluster-a"), Resume("cluster-a"), Delete("cluster-a")):
        reason = apply_control(state, control, at(10, 2)).rejected
        assert reason is not None and reason.startswith("unknown stream: deleted at ")
        assert f"kept until {kept_until}" in reason
    late = apply_result(state, ack(task), at(10, 2)).rejected
    assert late is not None and f"deleted at {at(10, 1)}" in late
    assert advance(state, at(10, 2)).state is state and next_due_ms(state) is None
    assert scavenge_due_ms(state, None) == kept_until
    assert advance(state, kept_until).state is None  # collected
    for control in (Pause("cluster-a"), Resume("cluster-a"), Delete("cluster-a")):
        assert apply_control(None, control, at(10, 1)).rejected == "unknown stream"
    assert apply_result(None, ack(task), at(10, 1)).rejected == "unknown stream"
    assert advance(None, at(10, 1)).rejected == "unknown stream"


def test_a_delete_keeps_the_windows_finished_before_it_for_the_flush_that_announces_them() -> None:
    """Issue 25, defect 10: a delete dropped `unannounced`, so an ack's commit was lost unless a
    flush (a transaction boundary) fell between the ack and the delete."""
    state, (task,) = started(at(10, 1))
    apply_result(state, ack(task), at(10, 1, 5))
    assert apply_control(state, Delete("cluster-a"), at(10, 1, 10)).rejected is None
    assert state.deleted_ms == at(10, 1, 10) and state.windows == []
    _, commit = announce(state, at(10, 1, 10))
    assert commit is not None
    assert (commit.previous_ms, commit.downstream_ms) == (at(10, 0), at(10, 1))
    assert [(w.start_ms, w.end_ms, w.reason) for w in commit.windows] == [
        (at(10, 0), at(10, 1), "ack")
    ]
    assert (state.announced_ms, state.unannounced) == (at(10, 1), [])


def test_controls_for_another_stream_are_rejected_without_change() -> None:
    state, _ = started(at(10, 1))
    before = snapshot(state)
    for control in (
        Pause("other"),
        Resume("other"),
        Delete("other"),
        Upsert(config(stream_id="x")),
    ):
        decision = apply_control(state, control, at(10, 1))
        assert decision.rejected == "stream_id does not match the stream"
        assert decision.state is state
    assert snapshot(state) == before


def test_upsert_replaces_the_config_without_moving_progress() -> None:
    state, (task,) = started(at(10, 1, 30))
    apply_control(state, Pause("cluster-a"), at(10, 1, 30))
    apply_result(state, ack(task), at(10, 1, 30))
    new = config(start_ms=at(9, 0), window_ms=2 * MINUTE_MS, params={"q": "up"})

    decision = apply_control(state, Upsert(new), at(10, 1, 30))

    assert state.config == new
    assert state.downstream_ms == at(10, 1) and state.paused
    assert bounds(state) == [(at(10, 1), at(10, 3))]  # the undispatched window is regenerated
    assert decision.tasks == ()
    apply_control(state, Upsert(config(start_ms=at(12, 0))), at(10, 1, 30))
    assert state.downstream_ms == at(10, 1)


def test_upsert_keeps_the_bounds_of_dispatched_windows() -> None:
    state, (task,) = started(at(10, 1))
    longer = config(window_ms=5 * MINUTE_MS, delay_ms=5 * MINUTE_MS, retry=Immediate())
    apply_control(state, Upsert(longer), at(10, 1))
    assert bounds(state) == [(at(10, 0), at(10, 1))]

    apply_result(state, nack(task), at(10, 1, 5))

    assert next_due_ms(state) == at(10, 6)  # a retry waits for end + delay, now 5 minutes
    retry = only(advance(state, at(10, 6)))
    assert (retry.start_ms, retry.end_ms, retry.attempt) == (at(10, 0), at(10, 1), 2)
    apply_result(state, ack(retry), at(10, 6))
    assert bounds(state) == [(at(10, 1), at(10, 6))]  # the new config from the next window on
    assert next_due_ms(state) == at(10, 11)


def test_a_bypass_never_closes_a_window_before_its_start() -> None:
    state, (task,) = started(at(10, 1))
    apply_result(state, ack(task, at(10, 0, 40)), at(10, 1))
    first = only(apply_control(state, Upsert(config(max_in_flight=2)), at(10, 1, 40)))
    assert bounds(state) == [(at(10, 0, 40), at(10, 1, 40)), (at(10, 1, 40), at(10, 2, 40))]
    remainder = only(apply_result(state, ack(first, at(10, 1, 35)), at(10, 1, 40)))
    assert (remainder.start_ms, remainder.end_ms) == (at(10, 1, 35), at(10, 1, 40))
    apply_control(state, Upsert(config(max_attempts=1)), at(10, 1, 40))  # drops the tail window
    assert bounds(state) == [(at(10, 1, 35), at(10, 1, 40))]

    decision = apply_result(state, nack(remainder), at(10, 1, 41))

    (bypass,) = decision.bypasses  # trunc(10:01:40) = 10:01:30 is before the start: close at end
    assert (bypass.start_ms, bypass.end_ms) == (at(10, 1, 35), at(10, 1, 40))
    assert state.downstream_ms == at(10, 1, 40)
    assert bounds(state) == [(at(10, 1, 40), at(10, 2, 40))]


def test_upsert_raising_max_in_flight_dispatches_more_windows_at_once() -> None:
    state, _ = started(at(10, 5))
    decision = apply_control(state, Upsert(config(max_in_flight=3)), at(10, 5))
    assert [(t.start_ms, t.end_ms) for t in decision.tasks] == [
        (at(10, 1), at(10, 2)),
        (at(10, 2), at(10, 3)),
    ]
    assert len(state.windows) == 3


def test_flush_coalesces_every_unannounced_window_into_one_commit() -> None:
    state, (task,) = started(at(10, 4))
    for _ in range(3):
        task = only(apply_result(state, ack(task), at(10, 4)))
    assert len(state.unannounced) == 3

    _, commit = announce(state, at(10, 4, 1))

    assert commit is not None
    assert (commit.previous_ms, commit.downstream_ms, commit.committed_ms) == (
        at(10, 0),
        at(10, 3),
        at(10, 4, 1),
    )
    assert [(w.start_ms, w.end_ms, w.reason) for w in commit.windows] == [
        (at(10, m), at(10, m + 1), "ack") for m in range(3)
    ]
    assert (state.announced_ms, state.unannounced) == (at(10, 3), [])
    assert announce(state, at(10, 4, 2)) == (state, None)
    apply_result(state, ack(task), at(10, 4, 3))
    _, commit = announce(state, at(10, 4, 3))
    assert commit is not None and (commit.previous_ms, commit.downstream_ms) == (
        at(10, 3),
        at(10, 4),
    )


def test_next_due_ms_is_the_earliest_due_dispatch_or_deadline() -> None:
    state, tasks = started(at(10, 0))
    assert tasks == () and next_due_ms(state) == at(10, 1)
    only(advance(state, at(10, 1)))
    assert next_due_ms(state) == at(10, 2)  # the deadline
    apply_control(state, Upsert(config(max_in_flight=2)), at(10, 1, 10))
    assert next_due_ms(state) == at(10, 2)  # min(deadline 10:02, due 10:02)
    apply_control(state, Pause("cluster-a"), at(10, 1, 10))
    assert next_due_ms(state) == at(10, 2)  # only the deadline counts while paused
