"""Giving a window up: the lifecycle's bypass rule (streams.core.lifecycle's rule table, row
"bypass"), which closes the window and makes the record that lets it be replayed later."""

from __future__ import annotations

from streams.core.hold import held_ms
from streams.core.model import BypassRecord, CommittedWindow, StreamState, Window


def bypass_window(
    state: StreamState, window: Window, index: int, first_failed_ms: int, now_ms: int
) -> BypassRecord:
    """Give the window up. The last window closes at its end truncated to step_ms."""
    end_ms = window.end_ms
    if index == len(state.windows) - 1:
        truncated_ms = end_ms - end_ms % state.config.step_ms
        if truncated_ms > window.start_ms:
            end_ms = truncated_ms
        state.frontier_ms = end_ms
    window.finished = True
    held = held_ms(window, now_ms)
    window.closed.append(CommittedWindow(window.start_ms, end_ms, "bypass", window.attempt, held))
    return BypassRecord(
        stream_id=state.config.stream_id,
        start_ms=window.start_ms,
        end_ms=end_ms,
        attempts=window.retried_count,
        first_failed_ms=first_failed_ms,
        bypassed_ms=now_ms,
        last_error=window.last_error,
        dispatches=window.attempt,
    )
