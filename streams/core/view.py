"""A stream's current view, as the coordinator publishes it on the compacted `streams` topic.

Pure: built from the core's state, the two counters the coordinator keeps beside it, and the
time. What a reader shows is derived here too (`status_at`), so that the coordinator and the
read model agree on what "catching up" means.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

from streams.core.config import StreamConfig, config_to_dict
from streams.core.model import ErrorInfo, StreamState
from streams.core.outage import hold_started_ms

Status: TypeAlias = Literal["live", "catching up", "retrying", "paused", "finished"]
STATUSES: tuple[Status, ...] = ("live", "catching up", "retrying", "paused", "finished")


def behind_ms(window_ms: int, delay_ms: int) -> int:
    """The lag past which a stream is catching up: two windows and its delay."""
    return 2 * window_ms + delay_ms


def status_at(
    status: Status, downstream_ms: int, window_ms: int, delay_ms: int, now_ms: int
) -> Status:
    """The status to show at `now_ms` of a view published with `status`.

    Paused, retrying and finished hold until the next view; live and catching up are told
    apart by the lag at `now_ms` (a stream that stopped progressing falls behind without a
    change of its own).
    """
    if status in ("paused", "retrying", "finished"):
        return status
    return "catching up" if now_ms > late_after_ms(downstream_ms, window_ms, delay_ms) else "live"


def late_after_ms(downstream_ms: int, window_ms: int, delay_ms: int) -> int:
    """When a stream whose progress is `downstream_ms` starts to be late: catching up if it
    runs (`status_at`), past its freshness objective (`behind_ms`)."""
    return downstream_ms + behind_ms(window_ms, delay_ms)


def fixed_status(state: StreamState) -> Status | None:
    """The status of `state` that time does not change (finished, paused, retrying), as
    `view_of` publishes it; None for a running stream, live or catching up by its lag
    (`status_at`). The coordinator's gauge of streams by state reads it too."""
    if state.finished_ms is not None and not state.unannounced:
        return "finished"  # once its last commit is announced too (see `view_of`)
    if state.paused:
        return "paused"
    for window in state.windows:
        if not window.finished and window.last_error is not None:
            return "retrying"
    return None


class PublishedView(msgspec.Struct, frozen=True):
    """One stream's view as the coordinator publishes it on `streams` (what a reader holds is
    `streams.readview.ReadView`, made from it).

    `downstream_ms` is what `commits` announced (never ahead of it); `window` the first
    outstanding window and `attempt` its last dispatched attempt (0: not yet dispatched);
    `last_error` the latest failure of an outstanding window; `bypasses` counts the windows
    bypassed since the stream was created (replayed ones too); `committed_ms` when
    `downstream_ms` last moved (None: not yet); `changed_ms` when this view was made;
    `held_since_ms` when the outage guard began holding the bypass of an outstanding window
    (its oldest open hold, kept until that window closes; None: none is held);
    `waiting_since_ms` since when a due window of it waits for its source's admission
    (streams.core.admission; None: none waits).
    """

    config: StreamConfig
    status: Status
    downstream_ms: int
    window: tuple[int, int] | None
    attempt: int
    last_error: ErrorInfo | None
    bypasses: int
    committed_ms: int | None
    incarnation: int
    changed_ms: int
    held_since_ms: int | None = None
    waiting_since_ms: int | None = None

    @property
    def stream_id(self) -> str:
        return self.config.stream_id

    def to_wire(self) -> dict[str, Any]:
        return {
            "stream_id": self.config.stream_id,
            "config": config_to_dict(self.config),
            **self.body(),
            "changed_ms": self.changed_ms,
        }

    def key(self) -> tuple[Any, ...]:
        """Everything but `changed_ms`, compactly: two views with equal keys show the same, so
        the coordinator publishes only when the key changed (and keeps only the key)."""
        return (
            self.config,
            self.status,
            self.downstream_ms,
            self.window,
            self.attempt,
            self.last_error,
            self.bypasses,
            self.committed_ms,
            self.incarnation,
            self.held_since_ms,
            self.waiting_since_ms,
        )

    def body(self) -> dict[str, Any]:
        """Everything but the stream id, its config and `changed_ms`, as wire fields
        (`held_since_ms` only while a window is held)."""
        window = self.window
        error = self.last_error
        body: dict[str, Any] = {
            "status": self.status,
            "downstream_ms": self.downstream_ms,
            "window": None if window is None else {"start_ms": window[0], "end_ms": window[1]},
            "attempt": self.attempt,
            "last_error": None if error is None else error.to_wire(),
            "bypasses": self.bypasses,
            "committed_ms": self.committed_ms,
            "incarnation": self.incarnation,
        }
        if self.held_since_ms is not None:
            body["held_since_ms"] = self.held_since_ms
        if self.waiting_since_ms is not None:
            body["waiting_since_ms"] = self.waiting_since_ms
        return body


def view_of(
    state: StreamState, bypasses: int, committed_ms: int | None, now_ms: int
) -> PublishedView:
    """The view of `state` at `now_ms`: progress as announced, the first outstanding window."""
    config = state.config
    current = None
    error: ErrorInfo | None = None
    waiting_ms: int | None = None
    for window in state.windows:
        if window.finished:
            continue
        if current is None:
            current = window
        if window.last_error is not None:
            error = window.last_error  # the latest outstanding window's failure
        since_ms = window.waiting_since_ms
        if since_ms is not None and (waiting_ms is None or since_ms < waiting_ms):
            waiting_ms = since_ms
    downstream_ms = state.announced_ms
    # Finished once its last commit is announced too: a view never shows a stream finished
    # with progress short of end_ms (Faust coalesces that commit for up to flush_ms).
    fixed = fixed_status(state)
    status = (
        fixed
        if fixed is not None
        else status_at("live", downstream_ms, config.window_ms, config.delay_ms, now_ms)
    )
    return PublishedView(
        config,
        status,
        downstream_ms,
        None if current is None else (current.start_ms, current.end_ms),
        0 if current is None else current.attempt,
        error,
        bypasses,
        committed_ms,
        state.incarnation,
        now_ms,
        hold_started_ms(state),
        waiting_ms,
    )


__all__ = [
    "STATUSES",
    "PublishedView",
    "Status",
    "behind_ms",
    "fixed_status",
    "status_at",
    "view_of",
]
