"""The window timeline of one stream: its recent windows as cells, for `/api/streams/<id>/timeline`.

Pure: the cells are a function of the stream's committed windows (read from a bounded tail of
`commits` by streams.dashboard.history), its listed bypassed windows and its view (both from the
read model), and the time. One cell per window, by start:

| outcome  | from                                                                            |
|----------|---------------------------------------------------------------------------------|
| acked    | a `commits` window of reason `ack` (with `held_ms` if the outage guard held it)  |
| partial  | an `ack` window shorter than the stream's `window_ms`: an ack whose `ack_ms` was |
|          | before the window's end (commits carry the interval done, not the one sent), but |
|          | not a bounded stream's last window cut at its `end_ms`                          |
| bypassed | a `commits` window of reason `bypass`, or a window listed on `bypassed` (which   |
|          | adds its failures, first failure, bypass time and last error)                   |
| replayed | a `commits` window of reason `replayed`: a bypassed window that a replay acked   |
| held     | the view's current window while the guard holds its bypass (`held_since_ms`)     |
| retrying | the view's current window after a failure                                        |
| open     | the view's current window otherwise: waiting for its time, or in flight          |

A later record of the same window wins (a replay after its bypass). Partial is judged against
the current `window_ms`, so windows from before a reconfiguration, and the remainder of a
window partly acked while later ones were out (`max_in_flight` > 1), may show as partial too.
The current window is left out when a committed window overlaps it (the view is older than the
tail). Cells with time between them that no record covers are marked `gap_before`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from itertools import pairwise
from typing import Any, Protocol
from urllib.parse import unquote

from streams.core import CommittedWindow
from streams.dashboard.state import BypassLike, StreamLike
from streams.readview import error_json as _error

OUTCOMES = ("acked", "partial", "retrying", "held", "bypassed", "replayed", "open")
MAX_CELLS = 60  # the strip's length: the most recent windows
PATH_PREFIX, PATH_SUFFIX = "/api/streams/", "/timeline"
MAX_STREAM_ID_CHARS = 200  # as streams.wire's stream_id
_REASONS = {"bypass": "bypassed", "replayed": "replayed"}


@dataclass(frozen=True, slots=True)
class Recent:
    """What a bounded read of the stream's `commits` partition found (streams.dashboard.history).

    `windows`: its committed windows in the order written, each with its commit's
    `committed_ms`; the offsets of `partition` from `from_offset` up to `to_offset` were read
    (`records_read` of them, of at most `limit`; `complete`: up to the partition's end);
    `error`: why the read failed.
    """

    windows: tuple[tuple[CommittedWindow, int], ...] = ()
    partition: int | None = None
    from_offset: int | None = None
    to_offset: int | None = None
    records_read: int = 0
    complete: bool = True
    limit: int = 0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "from_offset": self.from_offset,
            "to_offset": self.to_offset,
            "records_read": self.records_read,
            "complete": self.complete,
            "limit": self.limit,
            "error": self.error,
        }


class CommitHistory(Protocol):
    """The read of a stream's recent commits (streams.dashboard.history; a fake in tests)."""

    def recent(self, stream_id: str) -> Recent: ...
    def close(self) -> None: ...


def cells(
    stream: StreamLike,
    committed: Iterable[tuple[CommittedWindow, int]],
    bypasses: Iterable[BypassLike],
    limit: int = MAX_CELLS,
) -> list[dict[str, Any]]:
    """The stream's most recent `limit` windows as cells, oldest first (see the table above)."""
    config = stream.config or {}
    window_ms, end_ms = config.get("window_ms"), config.get("end_ms")
    by_start: dict[int, dict[str, Any]] = {}
    for window, committed_ms in committed:
        outcome = _REASONS.get(window.reason, "acked")
        short = isinstance(window_ms, int) and window.end_ms - window.start_ms < window_ms
        if outcome == "acked" and short and window.end_ms != end_ms:
            outcome = "partial"
        by_start[window.start_ms] = _cell(
            window.start_ms,
            window.end_ms,
            outcome,
            attempts=window.attempts,
            committed_ms=committed_ms,
            held_ms=window.held_ms,
        )
    for bypass in bypasses:
        if bypass.stream_id != stream.stream_id:
            continue
        cell = by_start.get(bypass.start_ms)
        if cell is not None and cell["outcome"] != "bypassed":
            continue  # replayed since (its tombstone not read yet)
        listed = _cell(bypass.start_ms, bypass.end_ms, "bypassed", attempts=bypass.attempts)
        by_start[bypass.start_ms] = {
            **listed,
            **(cell or {}),
            "attempts": bypass.attempts,  # failures, as `bypassed` counts them
            "first_failed_ms": bypass.first_failed_ms,
            "bypassed_ms": bypass.bypassed_ms,
            "last_error": _error(bypass.last_error),
        }
    current = _current(stream)
    if current is not None and not any(
        c["start_ms"] < current["end_ms"] and current["start_ms"] < c["end_ms"]
        for c in by_start.values()
    ):
        by_start[current["start_ms"]] = current
    shown = [by_start[start] for start in sorted(by_start)][-limit:]
    for before, cell in pairwise(shown):
        cell["gap_before"] = cell["start_ms"] > before["end_ms"]
    return shown


def _current(stream: StreamLike) -> dict[str, Any] | None:
    """The view's first outstanding window: held, retrying, or open."""
    if stream.window is None:
        return None
    if stream.held_since_ms is not None:
        outcome = "held"
    elif stream.last_error is not None:
        outcome = "retrying"
    else:
        outcome = "open"
    return _cell(
        *stream.window,
        outcome,
        attempts=stream.attempt,
        last_error=_error(stream.last_error),
        held_since_ms=stream.held_since_ms,
        current=True,
    )


def _cell(start_ms: int, end_ms: int, outcome: str, **details: Any) -> dict[str, Any]:
    return {
        "start_ms": start_ms,
        "end_ms": end_ms,
        "outcome": outcome,
        "attempts": 0,
        "committed_ms": None,
        "held_ms": None,
        "held_since_ms": None,
        "first_failed_ms": None,
        "bypassed_ms": None,
        "last_error": None,
        "current": False,
        "gap_before": False,
        **details,
    }


def timeline_document(
    stream: StreamLike, recent: Recent, bypasses: Iterable[BypassLike], now_ms: int
) -> dict[str, Any]:
    """The JSON body of `/api/streams/<id>/timeline`: the cells, their counts, what was read."""
    shown = cells(stream, recent.windows, bypasses)
    counts = dict.fromkeys(OUTCOMES, 0)
    for cell in shown:
        counts[cell["outcome"]] += 1
    config = stream.config or {}
    return {
        "stream_id": stream.stream_id,
        "now_ms": now_ms,
        "state": stream.state(now_ms),
        "window_ms": config.get("window_ms"),
        "cells": shown,
        "counts": counts,
        "history": recent.to_json(),
    }


# -- the endpoint ----------------------------------------------------------------------------------


def is_timeline_path(path: str) -> bool:
    return path.startswith(PATH_PREFIX) and path.endswith(PATH_SUFFIX)


def stream_id_of(path: str) -> str:
    """The stream id in `/api/streams/<id>/timeline`, percent-decoded; ValueError naming the
    field when it is not a stream id."""
    raw = path[len(PATH_PREFIX) : len(path) - len(PATH_SUFFIX)]
    try:
        stream_id = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise ValueError("stream_id: is not UTF-8 once percent-decoded") from None
    if not stream_id:
        raise ValueError("stream_id: must not be empty")
    if len(stream_id) > MAX_STREAM_ID_CHARS:
        raise ValueError(f"stream_id: must be at most {MAX_STREAM_ID_CHARS} characters")
    return stream_id


def answer(
    path: str,
    find: Callable[[str], StreamLike | None],
    listed: Callable[[str], Iterable[BypassLike]],
    history: CommitHistory | None,
    now_ms: int,
) -> tuple[HTTPStatus, dict[str, Any]]:
    """The status and body for a timeline path: 400 naming the field, 404 for a stream `find`
    does not know (the read model's `stream`: one lookup, not a scan of every stream), else 200
    with the document; `listed` gives a stream's windows listed on `bypassed`."""
    try:
        stream_id = stream_id_of(path)
    except ValueError as exc:
        return HTTPStatus.BAD_REQUEST, {"error": str(exc), "field": "stream_id"}
    stream = find(stream_id)
    if stream is None:
        return HTTPStatus.NOT_FOUND, {"error": f"unknown stream: {stream_id}"}
    recent = Recent() if history is None else history.recent(stream_id)
    return HTTPStatus.OK, timeline_document(stream, recent, listed(stream_id), now_ms)


__all__ = [
    "OUTCOMES",
    "CommitHistory",
    "Recent",
    "answer",
    "cells",
    "is_timeline_path",
    "stream_id_of",
    "timeline_document",
]
