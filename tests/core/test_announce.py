"""Announcement coalescing (streams.core.announce): when finished windows go out on `commits`."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.core.announce import FLUSH_MAX_WINDOWS, announce_at_ms, announce_full

T = 1_795_946_400_000
INTERVAL_MS = 1_000


def test_a_full_stream_is_announced_at_once() -> None:
    assert not announce_full(FLUSH_MAX_WINDOWS - 1)
    assert announce_full(FLUSH_MAX_WINDOWS)
    assert announce_at_ms(FLUSH_MAX_WINDOWS, T + 1, T, INTERVAL_MS) == T + 1


def test_the_first_announcement_goes_at_once_and_later_ones_wait_for_the_interval() -> None:
    assert announce_at_ms(1, T, None, INTERVAL_MS) == T
    assert announce_at_ms(1, T + 1, T, INTERVAL_MS) == T + INTERVAL_MS
    assert announce_at_ms(1, T + INTERVAL_MS - 1, T, INTERVAL_MS) == T + INTERVAL_MS
    assert announce_at_ms(1, T + INTERVAL_MS, T, INTERVAL_MS) == T + INTERVAL_MS


def test_a_clock_stepped_back_announces_at_once() -> None:
    assert announce_at_ms(1, T - 1, T, INTERVAL_MS) == T - 1


@given(
    st.integers(1, 2 * FLUSH_MAX_WINDOWS),
    st.integers(0, 2**45),
    st.integers(-(2**20), 2**20) | st.none(),
    st.integers(1, 2**20),
)
def test_an_announcement_is_never_in_the_past_nor_more_than_an_interval_away(
    waiting: int, now_ms: int, since_ms: int | None, interval_ms: int
) -> None:
    last_ms = None if since_ms is None else now_ms - since_ms
    at_ms = announce_at_ms(waiting, now_ms, last_ms, interval_ms)
    assert now_ms <= at_ms <= now_ms + interval_ms
    if at_ms > now_ms:  # it waits: only within an interval after the last, and not full
        assert last_ms is not None and at_ms == last_ms + interval_ms
        assert not announce_full(waiting)
