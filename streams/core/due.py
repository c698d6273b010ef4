"""When a stream next needs the clock: the earliest `now_ms` at which the lifecycle's `advance`
would change it (a dispatch come due, a deadline passed). The coordinator's due index keeps one
such time per stream (streams.coordinator.index)."""

from __future__ import annotations

from streams.core.model import StreamState


def next_due_ms(state: StreamState, deadlines: bool = True, parked: bool = False) -> int | None:
    """The earliest `now_ms` at which `advance` would change something, or None if never.

    `deadlines=False`: the earliest dispatch alone (what `advance(..., expire=False)` does).
    A finished or deleted stream has nothing due (its collection is `retention.scavenge_due_ms`).
    A window the gate denied (streams.core.gate) is due as before, at its `due_ms`, now or
    past: this knows no gate. `parked=True` leaves such a window out, for a coordinator that
    wakes the streams its gate keeps waiting itself (it alone knows when its gate may admit:
    streams.coordinator.admission), rather than spinning on them.
    """
    earliest: int | None = None
    paused = state.paused
    for window in state.windows:
        if window.in_flight:
            if not deadlines:
                continue
            at = window.deadline_ms
        elif window.finished or paused or (parked and window.waiting_since_ms is not None):
            continue
        else:
            at = window.due_ms
        if at is not None and (earliest is None or at < earliest):
            earliest = at
    return earliest
