"""A stream's view (streams.core.view): what it shows of the state, and its status rule."""

from __future__ import annotations

import msgspec.structs
from hypothesis import given
from hypothesis import strategies as st

from streams.core import (
    ErrorInfo,
    Immediate,
    Result,
    StreamConfig,
    advance,
    announce,
    apply_control,
    apply_result,
    create_state,
)
from streams.core.model import Pause, StreamState
from streams.core.view import behind_ms, status_at, view_of

T0 = 1_795_946_400_000
MIN = 60_000


def created(**config: object) -> StreamState:
    decision = create_state(StreamConfig("s", T0, **config), T0 + 30_000)  # type: ignore[arg-type]
    assert decision.state is not None
    return decision.state


def test_a_new_stream_shows_its_first_window_undispatched_and_no_commit() -> None:
    view = view_of(created(), 0, None, T0 + 30_000)
    assert (view.status, view.downstream_ms, view.window, view.attempt) == (
        "live", T0, (T0, T0 + MIN), 0
    )  # fmt: skip
    assert view.last_error is None and view.committed_ms is None and view.bypasses == 0
    assert view.changed_ms == T0 + 30_000 and view.to_wire()["stream_id"] == "s"
    assert "changed_ms" not in view.body() and "stream_id" not in view.body()
    assert view.key() == view_of(created(), 0, None, T0 + 90_000).key()  # time aside


def test_a_failure_is_retrying_with_its_error_and_pause_takes_precedence() -> None:
    state = created(retry=Immediate())
    now = T0 + MIN
    (task,) = _dispatch(state, now)
    error = ErrorInfo("no_data", "empty")
    apply_result(state, Result("s", task[0], task[1], 1, "nack", error=error), now)
    view = view_of(state, 0, None, now)
    assert view.status == "retrying" and view.last_error == error and view.attempt == 2
    apply_control(state, Pause("s"), now)
    assert view_of(state, 0, None, now).status == "paused"


def test_progress_shows_as_announced_not_ahead_of_commits() -> None:
    state = created()
    now = T0 + MIN
    (task,) = _dispatch(state, now)
    apply_result(state, Result("s", task[0], task[1], 1, "ack", task[1]), now)
    assert state.downstream_ms == T0 + MIN
    assert view_of(state, 0, None, now).downstream_ms == T0  # not flushed yet


def test_a_finished_stream_shows_as_finished_only_once_its_last_commit_is_announced() -> None:
    state = created(end_ms=T0 + MIN)
    now = T0 + MIN
    (task,) = _dispatch(state, now)
    apply_result(state, Result("s", task[0], task[1], 1, "ack", task[1]), now)
    assert state.finished_ms == now and state.unannounced  # the commit is not flushed yet
    view = view_of(state, 0, None, now)
    assert view.status != "finished" and view.downstream_ms == T0
    announce(state, now)
    view = view_of(state, 0, None, now)
    assert view.status == "finished" and view.downstream_ms == T0 + MIN and view.window is None


def test_a_held_window_shows_when_its_hold_began_until_it_closes() -> None:
    state = created(retry=Immediate(), bypass_after_ms=MIN)
    error = ErrorInfo("no_data", "source down")
    now = T0 + MIN
    _dispatch(state, now)
    held: list[int | None] = []
    for step in range(3):  # the budget runs out at the second failure: held from there on
        now = T0 + MIN + step * MIN
        nack = Result("s", T0, T0 + MIN, state.windows[0].attempt, "nack", error=error)
        apply_result(state, nack, now, max_hold_ms=3_600_000)
        view = view_of(state, 0, None, now)
        held.append(view.held_since_ms)
        assert view.body().get("held_since_ms") == view.held_since_ms
    assert held == [None, T0 + 2 * MIN, T0 + 2 * MIN]
    assert "held_since_ms" not in view_of(created(), 0, None, now).body()
    unheld = view_of(state, 0, None, now)
    assert msgspec.structs.replace(unheld, held_since_ms=None).key() != unheld.key()
    attempt = state.windows[0].attempt
    apply_result(state, Result("s", T0, T0 + MIN, attempt, "ack", T0 + MIN), now)
    assert view_of(state, 0, None, now).held_since_ms is None  # closed: no longer held


def _dispatch(state: StreamState, now_ms: int) -> list[tuple[int, int]]:
    return [(t.start_ms, t.end_ms) for t in advance(state, now_ms).tasks]


@given(
    st.sampled_from(["live", "catching up", "retrying", "paused", "finished"]),
    st.integers(0, 10**12),
    st.integers(1, 10**7),
    st.integers(0, 10**7),
    st.integers(0, 10**12),
)
def test_status_at_keeps_the_held_states_and_tells_the_others_by_lag(
    status: str, downstream_ms: int, window_ms: int, delay_ms: int, lag_ms: int
) -> None:
    shown = status_at(status, downstream_ms, window_ms, delay_ms, downstream_ms + lag_ms)  # type: ignore[arg-type]
    if status in ("retrying", "paused", "finished"):
        assert shown == status
    else:
        assert shown == ("catching up" if lag_ms > behind_ms(window_ms, delay_ms) else "live")


@given(st.integers(0, 100), st.integers(T0, T0 + 10 * MIN))
def test_a_view_always_has_a_known_status_and_the_window_after_downstream(
    ticks: int, now_ms: int
) -> None:
    state = created(max_in_flight=3)
    _dispatch(state, now_ms)
    view = view_of(state, ticks, None, now_ms)
    assert view.bypasses == ticks
    assert view.status in ("live", "catching up")
    assert view.window is not None and view.window[0] >= view.downstream_ms
