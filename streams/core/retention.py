"""What the scavenger collects, and when: ended streams and bypassed windows past retention.

Pure, like the lifecycle: time is `now_ms`. A finished or deleted stream is collected by
`streams.core.lifecycle.advance` once `gc_grace_ms` has passed; a bypassed window stays listed
(replayable) for `bypass_retention_ms` from when it was bypassed, then it is unlisted (a tombstone
on `bypassed`) unless a replay of it is queued or in flight.
"""

from __future__ import annotations

from streams.core.model import StreamState
from streams.core.replay import ReplayState


def oldest_bypass_ms(replays: ReplayState) -> int | None:
    """When the oldest listed window not being replayed was bypassed (None: there is none)."""
    return min(
        (w.bypassed_ms for w in replays.listed if not w.attempt and not w.queued), default=None
    )


def scavenge_due_ms(state: StreamState, oldest_bypass: int | None) -> int | None:
    """When the scavenger has work for the stream: its collection, or its oldest listed
    window's expiry, whichever comes first (None: never)."""
    return scavenge_at_ms(state.collect_at_ms(), state.config.bypass_retention_ms, oldest_bypass)


def scavenge_at_ms(
    collect_at: int | None, retention_ms: int, oldest_bypass: int | None
) -> int | None:
    """`scavenge_due_ms` from the stream's collection time (None: it runs) and its
    `bypass_retention_ms`, which is all it reads of the state."""
    expire_at = None if oldest_bypass is None else oldest_bypass + retention_ms
    if collect_at is None:
        return expire_at
    return collect_at if expire_at is None else min(collect_at, expire_at)


def expire_bypasses(replays: ReplayState, retention_ms: int, now_ms: int) -> tuple[int, ...]:
    """Unlist the windows bypassed `retention_ms` or more ago (not one being replayed);
    return their start_ms."""
    cutoff_ms = now_ms - retention_ms
    expired = tuple(
        w.start_ms
        for w in replays.listed
        if w.bypassed_ms <= cutoff_ms and not w.attempt and not w.queued
    )
    if expired:
        gone = set(expired)
        replays.listed = [w for w in replays.listed if w.start_ms not in gone]
    return expired
