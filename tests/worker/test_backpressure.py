"""The worker's backpressure rule (streams.worker.backpressure), at explicit counts and times."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.worker.backpressure import PAUSE_AFTER_MS, Backpressure


def test_a_full_buffer_holds_the_poll_then_pauses_and_resumes_at_half_the_buffer() -> None:
    rule = Backpressure(limit=12, buffer=4)  # 8 threads, 4 buffered
    assert rule.step(11, 0) is None and not rule.holding
    assert rule.step(12, 0) is None and rule.holding  # full: wait for a handler, keep polling off
    assert rule.step(12, PAUSE_AFTER_MS - 1) is None and rule.holding
    assert rule.step(12, PAUSE_AFTER_MS) == "pause" and rule.paused and not rule.holding
    assert rule.step(11, PAUSE_AFTER_MS + 1) is None  # one finished: still paused
    assert rule.step(10, PAUSE_AFTER_MS + 2) == "resume" and not rule.paused  # half of 4 drained
    assert rule.step(10, PAUSE_AFTER_MS + 3) is None


def test_a_buffer_that_drains_in_time_never_pauses() -> None:
    rule = Backpressure(limit=3, buffer=1)
    assert rule.step(3, 0) is None and rule.holding
    assert rule.step(2, PAUSE_AFTER_MS - 1) is None and not rule.holding
    assert rule.step(3, PAUSE_AFTER_MS) is None and rule.holding  # full again: a new wait
    assert rule.step(3, 2 * PAUSE_AFTER_MS - 1) is None


def test_after_a_stop_nothing_resumes() -> None:
    rule = Backpressure(limit=3, buffer=1)
    rule.stopped()
    assert rule.step(0, 10) is None and rule.paused


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 3000)), max_size=60))
def test_pauses_and_resumes_alternate_and_never_pause_below_the_limit(
    steps: list[tuple[int, int]],
) -> None:
    rule, now_ms, last = Backpressure(limit=10, buffer=2), 0, "resume"
    for taken, dt_ms in steps:
        now_ms += dt_ms
        step = rule.step(taken, now_ms)
        if step is not None:
            assert step != last, "a pause follows a resume and the other way round"
            last = step
        if step == "pause":
            assert taken >= 10
        if step == "resume":
            assert taken <= 9
        assert not (rule.paused and rule.holding)
