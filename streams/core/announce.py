"""Announcements: what a stream's finished windows make on `commits` (`announce`), and when
they go out (coalescing).

A stream's first announcement after a quiet interval goes out at once (so ack-to-commit latency
stays low); later ones within `interval_ms` of it wait and go out together, as one commit. A
stream with FLUSH_MAX_WINDOWS windows waiting announces at once, whatever the interval says, so
that one commit stays bounded. An engine that announces at its own checkpoints asks only
`announce_full`.
"""

from __future__ import annotations

from streams.core.model import Commit, StreamState

# Announce a stream's windows at once when this many wait: a commit lists each of them, and
# 256 keep it a few KiB.
FLUSH_MAX_WINDOWS = 256


def announce_full(waiting: int) -> bool:
    """Whether `waiting` finished windows are too many to wait any longer."""
    return waiting >= FLUSH_MAX_WINDOWS


def announce_at_ms(waiting: int, now_ms: int, last_ms: int | None, interval_ms: int) -> int:
    """When `waiting` finished windows (at least one) are announced: `now_ms` (at once), or
    `last_ms + interval_ms`, the end of the interval after the last announcement at `last_ms`.

    A wall clock stepped back behind the last announcement (now_ms < last_ms) announces at
    once: a backward step must not withhold commits for as long as the step.
    """
    if last_ms is not None and 0 <= now_ms - last_ms < interval_ms and not announce_full(waiting):
        return last_ms + interval_ms
    return now_ms


def announce(state: StreamState, now_ms: int) -> tuple[StreamState, Commit | None]:
    """Announce every unannounced committed window in one Commit (None if there is none)."""
    if not state.unannounced:
        return state, None
    commit = Commit(
        stream_id=state.config.stream_id,
        downstream_ms=state.downstream_ms,
        previous_ms=state.announced_ms,
        committed_ms=now_ms,
        windows=tuple(state.unannounced),
    )
    state.announced_ms = state.downstream_ms
    state.unannounced = []
    return state, commit
