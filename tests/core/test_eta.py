"""streams.core.eta: a catching-up stream's pace over its views, and when it is live again."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.core.eta import MIN_SPAN_MS, SPAN_MS, Pace, Sample, live_at_ms, observe, rate

MIN = 60_000


def test_no_rate_until_the_views_span_the_minimum() -> None:
    pace = observe(None, 0, 0)
    assert rate(pace) is None
    pace = observe(pace, MIN_SPAN_MS - 1, 100_000)
    assert rate(pace) is None
    pace = observe(pace, MIN_SPAN_MS, 100_000)
    assert rate(pace) == 100_000 / MIN_SPAN_MS


def test_the_anchor_moves_up_once_a_span_passed_so_the_rate_follows_a_change_of_pace() -> None:
    pace = None
    for t in range(0, 2 * SPAN_MS + 1, 1000):  # 3 progress ms a wall ms for 10 minutes
        pace = observe(pace, t, 3 * t)
    assert pace is not None and rate(pace) == 3.0
    base_ms, base_down = 2 * SPAN_MS, 6 * SPAN_MS
    for t in range(1000, 3 * SPAN_MS + 1, 1000):  # then 1.5 for 15 minutes
        pace = observe(pace, base_ms + t, base_down + t * 3 // 2)
    assert rate(pace) == 1.5
    # The samples span SPAN_MS to twice that: never the whole history.
    assert SPAN_MS <= pace.latest.at_ms - pace.anchor.at_ms <= 2 * SPAN_MS


def test_a_view_that_goes_back_starts_afresh() -> None:
    pace = observe(observe(None, 0, 0), 60_000, 120_000)
    assert observe(pace, 70_000, 10) == Pace(
        Sample(70_000, 10), Sample(70_000, 10), Sample(70_000, 10)
    )
    assert observe(pace, 50_000, 130_000).anchor == Sample(50_000, 130_000)


def test_live_again_when_the_lag_is_down_to_the_behind_bound() -> None:
    # An hour behind at 10:00 (behind_after at 09:02 for a 1-minute window: two windows), three
    # times as fast as the clock: it gains 2 ms a ms, 58 minutes to gain, 29 minutes.
    changed = 10 * 60 * MIN
    behind_after = changed - 58 * MIN
    assert live_at_ms(changed, behind_after, 3.0) == changed + 29 * MIN
    assert live_at_ms(changed, behind_after, 1.0) is None  # keeps its lag
    assert live_at_ms(changed, behind_after, 0.5) is None  # loses ground
    assert live_at_ms(changed, changed + 1, 3.0) == changed  # already within the bound


@given(
    st.integers(0, 10**12),
    st.integers(1, 10**9),
    st.floats(1.001, 1000.0, allow_nan=False),
)
def test_at_the_estimated_time_the_lag_is_within_the_bound(
    changed_ms: int, to_gain_ms: int, progress_rate: float
) -> None:
    behind_after = changed_ms - to_gain_ms
    live = live_at_ms(changed_ms, behind_after, progress_rate)
    assert live is not None and live >= changed_ms
    elapsed = live - changed_ms
    # Progress moved rate * elapsed; the bound moved as much: the clock passed it again?
    gained = (progress_rate - 1.0) * elapsed
    assert gained >= to_gain_ms * (1 - 1e-9)
    assert (progress_rate - 1.0) * (elapsed - 1) < to_gain_ms + 1e-6 * to_gain_ms  # not later


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=60))
def test_the_rate_is_measured_between_two_of_the_views_seen(steps: list[tuple[int, int]]) -> None:
    pace, at, down, seen = None, 0, 0, set()
    for dt, dd in steps:
        at, down = at + dt, down + dd
        pace = observe(pace, at, down)
        seen.add((at, down))
    assert pace is not None and pace.latest == Sample(at, down)
    assert tuple(pace.anchor) in seen and tuple(pace.middle) in seen
    assert pace.anchor.at_ms <= pace.middle.at_ms <= pace.latest.at_ms
    found = rate(pace)
    if found is not None:
        assert found >= 0 and pace.latest.at_ms - pace.anchor.at_ms >= MIN_SPAN_MS
