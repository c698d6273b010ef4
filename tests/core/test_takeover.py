"""Takeover grace (streams.core.takeover): when it ends, and which streams it holds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.core import advance, next_due_ms
from streams.core.takeover import GraceHold, grace_ends_ms, grace_hold, grace_over
from tests.core.helpers import MINUTE_MS, at, started

T = at(10, 1)


def test_no_bound_no_grace() -> None:
    assert grace_ends_ms(1_000, None) is None
    assert grace_ends_ms(1_000, 45_000) == 46_000


@given(st.integers(0, 2**40), st.integers(0, 2**40), st.integers(0, 2**40))
def test_a_grace_is_over_from_its_end_on_and_stays_over(ends: int, now: int, later: int) -> None:
    assert grace_over(ends, ends)
    assert grace_over(ends, now) == (now >= ends)
    if grace_over(ends, now):
        assert grace_over(ends, now + later)


def test_a_stream_whose_deadline_passed_is_held_for_its_dispatches_alone() -> None:
    state, (task,) = started(T)
    after = task.deadline_ms + 1
    advance(state, after, expire=False)  # the attempt stays in flight
    held = grace_hold(state, after, None)
    assert held == GraceHold(next_due_ms(state, deadlines=False))
    assert held is not None and (held.wake_ms is None or held.wake_ms > after)


def test_a_stream_with_nothing_due_is_not_held() -> None:
    state, (task,) = started(T)
    assert grace_hold(state, task.deadline_ms - 1, None) is None


def test_a_passed_replay_deadline_holds_the_stream_too() -> None:
    state, (task,) = started(T)
    now = task.deadline_ms - 1
    assert grace_hold(state, now, replay_due_ms=now) == GraceHold(
        next_due_ms(state, deadlines=False)
    )
    assert grace_hold(state, now, replay_due_ms=now + 1) is None


@given(
    st.integers(0, 30 * MINUTE_MS),
    st.integers(0, 30 * MINUTE_MS) | st.none(),
    st.integers(1, 3),
)
def test_the_grace_never_indexes_a_stream_at_a_passed_time(
    offset_ms: int, replay_offset_ms: int | None, in_flight: int
) -> None:
    """After a tick in the grace, a stream is either held (its passed deadline waits, its next
    dispatch is ahead) or due only ahead of now: never indexed in the past, a busy loop."""
    state, _ = started(T, max_in_flight=in_flight)
    now = T + offset_ms
    advance(state, now, expire=False)
    replay_ms = None if replay_offset_ms is None else T + replay_offset_ms
    held = grace_hold(state, now, replay_ms)
    due = next_due_ms(state)
    if held is None:
        assert due is None or due > now
        assert replay_ms is None or replay_ms > now
    else:
        assert held.wake_ms is None or held.wake_ms > now
        assert (due is not None and due <= now) or (replay_ms is not None and replay_ms <= now)
