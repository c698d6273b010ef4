"""One window's hold: the outage guard's rule for a time-based bypass (see streams.core.outage).

The lifecycle asks `bypass_held` when the seed's rule (`now_ms - first_failed_ms >=
bypass_after_ms`) would bypass a window, passing `max_hold_ms`: `outage_max_hold_ms` while the
stream's source is in outage, 0 when it is not. The first such failure starts the window's hold
(`held_since_ms`); later ones keep holding it while the source stays in outage and less than
`max_hold_ms` has passed since. So a hold only ever postpones a bypass the seed's rule makes, and
it never touches a bypass for a non-retryable kind or `max_attempts`.
"""

from __future__ import annotations

from streams.core.model import Window


def bypass_held(window: Window, now_ms: int, max_hold_ms: int) -> bool:
    """Whether the time-based bypass the seed's rule makes at `now_ms` is held (may start it)."""
    since_ms = window.held_since_ms
    if since_ms is None:
        if max_hold_ms <= 0:
            return False
        window.held_since_ms = now_ms
        return True
    return now_ms - since_ms < max_hold_ms


def held_ms(window: Window, now_ms: int) -> int | None:
    """How long `window` has been held at `now_ms` (None: never held); a clock step back is 0."""
    since_ms = window.held_since_ms
    return None if since_ms is None else max(0, now_ms - since_ms)
