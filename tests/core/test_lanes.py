"""Which lane owns a result (streams.core.lanes): the replay lane's own attempts, nothing else."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.core import Result
from streams.core.lanes import lane_of, replay_window
from streams.core.replay import Listed, ReplayState

T = 1_795_946_400_000
END = T + 60_000


def listed(attempt: int, live_attempt: int = 3, replays: int = 1) -> ReplayState:
    window = Listed(T, END, 3, T, T, None, attempt=attempt, live_attempt=live_attempt)
    window.replays = replays
    return ReplayState("s", [window])


def result(attempt: int, start_ms: int = T, end_ms: int = END) -> Result:
    return Result("s", start_ms, end_ms, attempt, "ack", ack_ms=end_ms)


def test_a_stream_without_a_replay_has_only_the_live_lane() -> None:
    assert lane_of(None, result(4)) == "live"


def test_a_replay_attempt_of_a_listed_window_is_the_replay_lanes() -> None:
    state = listed(attempt=4)
    assert lane_of(state, result(4)) == "replay"
    assert replay_window(state, result(4)) is state.listed[0]


def test_a_live_attempts_result_is_the_live_lanes() -> None:
    assert lane_of(listed(attempt=4), result(3)) == "live"


def test_a_window_not_in_replay_or_not_listed_is_the_live_lanes() -> None:
    assert lane_of(listed(attempt=0), result(4)) == "live"
    assert lane_of(listed(attempt=4), result(4, T + 60_000, END + 60_000)) == "live"


@given(st.integers(1, 50), st.integers(0, 20), st.integers(0, 20), st.integers(1, 5))
def test_the_lane_is_told_by_the_attempt_alone(
    attempt: int, live_attempt: int, extra: int, replays: int
) -> None:
    """Attempts are numbered across both lanes: every attempt up to the window's last live one
    is the live lane's, every later one the replay lane's while it has one in flight."""
    in_flight = live_attempt + extra + 1
    state = listed(attempt=in_flight, live_attempt=live_attempt, replays=replays)
    assert lane_of(state, result(attempt)) == ("replay" if attempt > live_attempt else "live")
    assert lane_of(listed(0, live_attempt, replays), result(attempt)) == "live"
