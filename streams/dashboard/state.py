"""The `/api/state` document: read-model views rendered at a given time, as plain JSON data.

Only what the page shows leaves the server: no stream config (its params may hold secrets),
no raw records. Time is an argument, so the document is a pure function of its inputs.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from streams.outages import SourceOutage

STATES = ("live", "catching up", "retrying", "paused", "finished")
RECENT_BYPASSES = 50
MAX_MESSAGE_CHARS = 2000


class StreamLike(Protocol):
    """What the page needs of `streams.readmodel.StreamView`."""

    @property
    def stream_id(self) -> str: ...
    @property
    def paused(self) -> bool: ...
    @property
    def downstream_ms(self) -> int | None: ...
    @property
    def last_commit_ms(self) -> int | None: ...
    @property
    def window(self) -> tuple[int, int] | None: ...
    @property
    def attempt(self) -> int: ...
    @property
    def last_error(self) -> Mapping[str, str] | None: ...
    @property
    def bypasses(self) -> int: ...
    @property
    def config(self) -> Mapping[str, Any] | None: ...
    @property
    def held_since_ms(self) -> int | None: ...
    def lag_ms(self, now_ms: int) -> int | None: ...
    def state(self, now_ms: int) -> str: ...


class BypassLike(Protocol):
    """What the page needs of `streams.readmodel.BypassView`."""

    @property
    def stream_id(self) -> str: ...
    @property
    def start_ms(self) -> int: ...
    @property
    def end_ms(self) -> int: ...
    @property
    def attempts(self) -> int: ...
    @property
    def first_failed_ms(self) -> int: ...
    @property
    def bypassed_ms(self) -> int: ...
    @property
    def last_error(self) -> Mapping[str, str] | None: ...
    def replay_command(self) -> str: ...


@dataclass(frozen=True)
class Snapshot:
    """What the refresher last read. Views are copied, so requests never see one mid-update."""

    streams: tuple[StreamLike, ...] = ()
    bypasses: tuple[BypassLike, ...] = ()
    refreshed_ms: int | None = None
    refresh_error: str | None = None
    outages: tuple[SourceOutage, ...] = ()  # sources in outage (streams.outages): the banner

    @classmethod
    def of(
        cls, streams: Iterable[StreamLike], bypasses: Iterable[BypassLike], refreshed_ms: int
    ) -> Snapshot:
        recent = sorted(bypasses, key=lambda b: (-b.bypassed_ms, b.stream_id, b.start_ms))
        return cls(
            tuple(copy.copy(s) for s in streams),
            tuple(recent[:RECENT_BYPASSES]),
            refreshed_ms,
        )


def state_document(snapshot: Snapshot, now_ms: int) -> dict[str, Any]:
    """The JSON body of `/api/state`: streams by lag (largest first), counts, recent bypasses."""
    streams = [_stream(view, now_ms) for view in snapshot.streams]
    streams.sort(key=_by_lag)
    counts = dict.fromkeys(STATES, 0)
    for stream in streams:
        counts[stream["state"]] = counts.get(stream["state"], 0) + 1
    return {
        "now_ms": now_ms,
        "refreshed_ms": snapshot.refreshed_ms,
        "refresh_error": snapshot.refresh_error,
        "counts": counts,
        "streams": streams,
        "bypasses": [_bypass(view) for view in snapshot.bypasses],
        "outages": [{**o.to_json(), "line": o.line(now_ms)} for o in snapshot.outages],
    }


def _by_lag(stream: dict[str, Any]) -> tuple[bool, int, str]:
    lag = stream["lag_ms"]
    return (lag is None, -(lag or 0), stream["stream_id"])


def _stream(view: StreamLike, now_ms: int) -> dict[str, Any]:
    window = view.window
    return {
        "stream_id": view.stream_id,
        "state": view.state(now_ms),
        "lag_ms": view.lag_ms(now_ms),
        "downstream_ms": view.downstream_ms,
        "last_commit_ms": view.last_commit_ms,
        "window": None if window is None else {"start_ms": window[0], "end_ms": window[1]},
        "attempt": view.attempt,
        "last_error": _error(view.last_error),
        "bypasses": view.bypasses,
        "paused": view.paused,
    }


def _bypass(view: BypassLike) -> dict[str, Any]:
    return {
        "stream_id": view.stream_id,
        "start_ms": view.start_ms,
        "end_ms": view.end_ms,
        "attempts": view.attempts,
        "first_failed_ms": view.first_failed_ms,
        "bypassed_ms": view.bypassed_ms,
        "last_error": _error(view.last_error),
        "replay_command": view.replay_command(),
    }


def _error(error: Mapping[str, str] | None) -> dict[str, str] | None:
    """An error's kind and message only, the message cut to a bounded length."""
    if not error:
        return None
    kind, message = str(error.get("kind", "")), str(error.get("message", ""))
    return {"kind": kind, "message": message[:MAX_MESSAGE_CHARS]}
