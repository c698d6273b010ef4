"""One window's wait for admission (streams.core.gate), and the part of it its budget leaves out.

A window waits from the first time the gate denies it (`waiting_since_ms`) until it is
dispatched, or its stream is paused (a paused stream asks nothing: that time is not a wait).
Each decision in between asks the gate again; a coordinator down meanwhile counts as waiting,
since the window was not failing then either. When the wait ends, the part of it after the
window's first failure is added to `waited_ms`: the time-based bypass counts failure time
without it (`now_ms - first_failed_ms - waited_ms >= bypass_after_ms`), so that a window kept
waiting by a saturated source spends none of its budget. A wait before any failure is not
failure time to begin with. `waited_ms` never exceeds `now_ms - first_failed_ms` at the end of
a wait (a clock stepping back cannot make the budget grow past the time since the failure,
and the stored value stays within the codec's bounds).

The outage guard's hold (streams.core.hold) is left as it is: it starts at a failure where the
rule above would bypass (so a wait makes it start later), and it lasts `outage_max_hold_ms` of
wall time from there, waits included: it bounds how long an outage may postpone a bypass, and a
window that waits for admission during an outage is postponed by it all the same.
"""

from __future__ import annotations

from streams.core.gate import Gate
from streams.core.model import StreamState, Window


def denied(gate: Gate, state: StreamState, window: Window, now_ms: int) -> bool:
    """Ask `gate` for the live lane's dispatch of `window`; if denied, its wait starts (unless
    it already waits)."""
    if gate.admit(state, window.start_ms, window.end_ms, "live", now_ms):
        return False
    if window.waiting_since_ms is None:
        window.waiting_since_ms = now_ms
    return True


def end_wait(window: Window, now_ms: int) -> None:
    """`window`'s wait ends at `now_ms` (a dispatch or a pause); add what counts of it."""
    since_ms = window.waiting_since_ms
    window.waiting_since_ms = None
    first_ms = window.first_failed_ms
    if since_ms is None or first_ms is None:
        return
    waited_ms = now_ms - max(since_ms, first_ms)
    if waited_ms > 0:
        window.waited_ms = min(window.waited_ms + waited_ms, now_ms - first_ms)


def end_waits(state: StreamState, now_ms: int) -> None:
    """End the wait of every window of `state` that waits (its stream is paused)."""
    for window in state.windows:
        if window.waiting_since_ms is not None:
            end_wait(window, now_ms)
