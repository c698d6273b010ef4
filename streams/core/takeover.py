"""Takeover grace: a new owner of a partition (a restart, a takeover) fails no attempt on its
deadline until it has read `results` up to where they stood at assignment, since the acks its
predecessor never read may be waiting there.

The grace of a partition ends when the engine says it caught up, or at `grace_ends_ms` at the
latest, so that a stuck read cannot suppress timeouts for good. During it, a stream whose only
due work is a passed deadline is held: indexed for its other work alone, and woken once the
grace ends. Times here are the caller's monotonic clock (the grace bound) or its wall clock (a
stream's due times), as each function says; the coordinator's Ownership keeps the partitions.
"""

from __future__ import annotations

from typing import NamedTuple

from streams.core.due import next_due_ms
from streams.core.model import StreamState


def grace_ends_ms(assigned_ms: int, catch_up_max_ms: int | None) -> int | None:
    """When the grace of a partition assigned at `assigned_ms` (monotonic) ends at the latest;
    None: no grace (the engine never says it caught up)."""
    return None if catch_up_max_ms is None else assigned_ms + catch_up_max_ms


def grace_over(ends_ms: int, now_ms: int) -> bool:
    """Whether a grace that ends at `ends_ms` is over at `now_ms` (both monotonic)."""
    return now_ms >= ends_ms


class GraceHold(NamedTuple):
    """A stream held by the grace: `wake_ms` is when its other work (a dispatch) is due, None
    if it has none; its passed deadline waits for the grace to end."""

    wake_ms: int | None


def grace_hold(state: StreamState, now_ms: int, replay_due_ms: int | None) -> GraceHold | None:
    """Whether a stream ticked during the grace (its deadlines not expired) is held for it.

    Held when something of it is due by `now_ms` (wall clock) after that tick: its live work
    (`next_due_ms(state)`) or its replay lane's (`replay_due_ms`, None: none). What a tick
    without expiry leaves due is a passed deadline; None: not held, index it as usual.
    """
    live_ms = next_due_ms(state)
    if (live_ms is not None and live_ms <= now_ms) or (
        replay_due_ms is not None and replay_due_ms <= now_ms
    ):
        return GraceHold(next_due_ms(state, deadlines=False))
    return None
