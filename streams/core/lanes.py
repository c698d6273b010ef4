"""Which lane owns a result: the live lane (the stream's timeline, streams.core.lifecycle) or
the replay lane (its bypassed windows dispatched again, streams.core.replay).

A result is the replay lane's when its stream has a replay under way and the result answers a
window listed there that the replay lane dispatched, with an attempt after every live attempt of
that window. Every other result is the live lane's, which accepts, ignores (a duplicate, a late
result) or rejects it by its own rules: a window's attempts are numbered across both lanes, so
the attempt alone tells them apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias

from streams.core.model import Result

if TYPE_CHECKING:  # replay imports this module
    from streams.core.replay import Listed, ReplayState

Lane: TypeAlias = Literal["live", "replay"]


def replay_window(state: ReplayState | None, result: Result) -> Listed | None:
    """The listed window that `result` answers for the replay lane; None: the result is the
    live lane's. `state`: the stream's replay, None when it has none under way."""
    if state is None:
        return None
    for window in state.listed:
        if window.start_ms == result.start_ms and window.end_ms == result.end_ms:
            if not window.attempt or result.attempt <= window.live_attempt:
                return None  # not dispatched by the replay lane, or a live attempt's result
            return window
    return None


def lane_of(state: ReplayState | None, result: Result) -> Lane:
    """The lane that owns `result` (see the module's docstring)."""
    return "live" if replay_window(state, result) is None else "replay"
