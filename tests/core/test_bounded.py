"""Bounded streams: windows stop at `end_ms`, the stream finishes, and its state is collected
after `gc_grace_ms` (streams.core.lifecycle)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core import Upsert, advance, announce, apply_control, apply_result, next_due_ms
from streams.core.codec import state_from_dict, state_to_dict
from streams.core.retention import scavenge_due_ms
from streams.core.view import view_of

from .helpers import MINUTE_MS, ack, at, bounds, config, nack, only, started

GRACE_MS = 5_000


def test_windows_stop_at_end_ms_and_the_last_one_is_cut_there() -> None:
    state, _ = started(at(10, 0), end_ms=at(10, 2, 30), max_in_flight=5)
    assert bounds(state) == [
        (at(10, 0), at(10, 1)),
        (at(10, 1), at(10, 2)),
        (at(10, 2), at(10, 2, 30)),
    ]
    assert state.finished_ms is None


def test_the_stream_finishes_when_downstream_reaches_end_ms_then_is_collected() -> None:
    state, _ = started(at(10, 0), end_ms=at(10, 2), gc_grace_ms=GRACE_MS)
    first = only(advance(state, at(10, 1)))
    apply_result(state, ack(first), at(10, 1, 1))
    assert state.finished_ms is None
    second = only(advance(state, at(10, 2)))
    done = apply_result(state, ack(second), at(10, 2, 1))
    assert done.tasks == () and state.windows == [] and state.downstream_ms == at(10, 2)
    assert state.finished_ms == at(10, 2, 1)
    assert next_due_ms(state) is None and scavenge_due_ms(state, None) == at(10, 2, 1) + GRACE_MS
    assert advance(state, at(10, 5)).tasks == ()  # nothing more, ever
    announce(state, at(10, 2, 1))
    assert view_of(state, 0, at(10, 2, 1), at(10, 2, 2)).status == "finished"

    late = apply_result(state, ack(second), at(10, 2, 3)).rejected
    assert late is not None and late.startswith(f"stream finished at end_ms {at(10, 2)}")
    assert f"kept until {at(10, 2, 1) + GRACE_MS}" in late
    assert advance(state, at(10, 2, 1) + GRACE_MS - 1).state is state
    assert advance(state, at(10, 2, 1) + GRACE_MS).state is None  # collected


def test_a_bypassed_last_window_finishes_the_stream_too() -> None:
    state, _ = started(at(10, 0), end_ms=at(10, 1), max_attempts=1)
    task = only(advance(state, at(10, 1)))
    decision = apply_result(state, nack(task), at(10, 1, 5))
    assert len(decision.bypasses) == 1 and state.finished_ms == at(10, 1, 5)


def test_an_upsert_that_moves_end_ms_on_resumes_a_finished_stream() -> None:
    state, _ = started(at(10, 0), end_ms=at(10, 1))
    apply_result(state, ack(only(advance(state, at(10, 1)))), at(10, 1, 1))
    assert state.finished_ms is not None
    again = apply_control(state, Upsert(config(end_ms=at(10, 3))), at(10, 2, 30))
    assert state.finished_ms is None and bounds(state) == [(at(10, 1), at(10, 2))]
    assert len(again.tasks) == 1
    unbounded = apply_control(state, Upsert(config()), at(10, 2, 31))
    assert unbounded.rejected is None and state.finished_ms is None


def test_a_finished_state_reads_back() -> None:
    state, _ = started(at(10, 0), end_ms=at(10, 1))
    apply_result(state, ack(only(advance(state, at(10, 1)))), at(10, 1, 1))
    assert state_from_dict(state_to_dict(state)) == state


@settings(max_examples=200, deadline=None)
@given(
    windows=st.integers(1, 12),
    half=st.booleans(),
    in_flight=st.integers(1, 4),
    answers=st.lists(st.sampled_from(["ack", "nack"]), min_size=1, max_size=60),
)
def test_no_window_passes_end_ms_and_the_stream_finishes_exactly_there(
    windows: int, half: bool, in_flight: int, answers: list[str]
) -> None:
    end_ms = at(10, 0) + windows * MINUTE_MS + (30_000 if half else 0)
    state, _ = started(at(10, 0), end_ms=end_ms, max_in_flight=in_flight, bypass_after_ms=1)
    now = at(10, 0)
    for answer in answers:
        now += MINUTE_MS
        tasks = list(advance(state, now).tasks)
        for task in tasks:
            assert task.end_ms <= end_ms
            result = ack(task) if answer == "ack" else nack(task)
            tasks += apply_result(state, result, now).tasks
        assert all(w.end_ms <= end_ms for w in state.windows)
        assert state.downstream_ms <= end_ms
        assert (state.finished_ms is not None) == (state.downstream_ms == end_ms)
    if state.finished_ms is not None:
        assert advance(state, now + MINUTE_MS).tasks == () and state.windows == []
