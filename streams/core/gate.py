"""The gate the core asks before each dispatch: may this window go out now?

The lifecycle (`streams.core.lifecycle`) and the replay lane (`streams.core.replay`) ask it once
per window that is due and would otherwise be dispatched, in window order. True is a dispatch:
the core sends that window at once, so a gate may count it (take a token, a slot). False: the
window waits, not dispatched and not failing (see the lifecycle's rule table for what waiting
does to its budget). The rules that decide (per-source caps, priority, pacing) live elsewhere;
passing no gate (None) is today's behaviour, at today's cost.
"""

from __future__ import annotations

from typing import Protocol

from streams.core.lanes import Lane
from streams.core.model import StreamState


class Gate(Protocol):
    """Admission asked before a dispatch of (start_ms, end_ms] of `state`'s stream.

    `state` is the stream's live state as it stands (windows sent earlier in the same decision
    are in flight), for the replay lane too; `lane` says which lane dispatches ("live" for the
    stream's timeline, "replay" for a bypassed window sent again).
    """

    def admit(
        self, state: StreamState, start_ms: int, end_ms: int, lane: Lane, now_ms: int
    ) -> bool:
        """Whether the window may be dispatched at `now_ms` (True: it is, at once)."""
        ...


class _Open:
    """Admits everything: decides exactly as no gate does."""

    __slots__ = ()

    def admit(
        self, state: StreamState, start_ms: int, end_ms: int, lane: Lane, now_ms: int
    ) -> bool:
        return True


OPEN: Gate = _Open()
