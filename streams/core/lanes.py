"""Which lane owns a result: the live lane (the stream's timeline, streams.core.lifecycle) or
the replay lane (its bypassed windows dispatched again, streams.core.replay).

A result is the replay lane's when its stream has a replay under way and the result answers a
window listed there that the replay lane dispatched, with an attempt after every live attempt of
that window. Every other result is the live lane's, which accepts, ignores (a duplicate, a late
result) or rejects it by its own rules: a window's attempts are numbered across both lanes, so
the attempt alone tells them apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, TypeAlias, TypeVar

from streams.core.model import Result


class ListedWindow(Protocol):
    """What this module reads of a listed window (streams.core.replay.Listed): its bounds, its
    replay attempt in flight (0: none) and the live lane's last attempt. Written as a protocol
    so that replay.py, which asks this module, is not imported back."""

    @property
    def start_ms(self) -> int: ...
    @property
    def end_ms(self) -> int: ...
    @property
    def attempt(self) -> int: ...
    @property
    def live_attempt(self) -> int: ...


W = TypeVar("W", bound=ListedWindow, covariant=True)


class Replaying(Protocol[W]):
    """A stream's replay under way (streams.core.replay.ReplayState), as this module reads it."""

    @property
    def listed(self) -> Sequence[W]: ...


Lane: TypeAlias = Literal["live", "replay"]


def replay_window(state: Replaying[W] | None, result: Result) -> W | None:
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


def lane_of(state: Replaying[W] | None, result: Result) -> Lane:
    """The lane that owns `result` (see the module's docstring)."""
    return "live" if replay_window(state, result) is None else "replay"
