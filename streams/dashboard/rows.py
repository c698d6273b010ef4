"""A stream's row in the status page's table: what the page shows of its view, copied once.

Time is an argument: lag and state are rendered at the request's `now_ms`, not the refresh's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

STATES = ("live", "catching up", "retrying", "paused", "finished")
MAX_MESSAGE_CHARS = 2000


class RowSource(Protocol):
    """What a row is copied from: `streams.readmodel.BriefView` (or StreamView)."""

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
    def state(self, now_ms: int) -> str: ...
    def catching_up_after_ms(self) -> int | None: ...


def error_json(error: Mapping[str, str] | None) -> dict[str, str] | None:
    """An error's kind and message only, the message cut to a bounded length."""
    if not error:
        return None
    kind, message = str(error.get("kind", "")), str(error.get("message", ""))
    return {"kind": kind, "message": message[:MAX_MESSAGE_CHARS]}


@dataclass(frozen=True, slots=True)
class Row:
    """One stream as the table shows it, copied from its view when the view changed.

    `fixed_state` is the state when time does not change it (paused, retrying, finished);
    otherwise `behind_after_ms` is when it turns from live to catching up.
    """

    stream_id: str
    fixed_state: str | None
    behind_after_ms: int | None
    downstream_ms: int | None
    last_commit_ms: int | None
    window: tuple[int, int] | None
    attempt: int
    last_error: dict[str, str] | None
    bypasses: int
    paused: bool

    @classmethod
    def of(cls, view: RowSource, now_ms: int) -> Row:
        after = view.catching_up_after_ms()
        return cls(
            view.stream_id,
            view.state(now_ms) if after is None else None,
            after,
            view.downstream_ms,
            view.last_commit_ms,
            view.window,
            view.attempt,
            error_json(view.last_error),
            view.bypasses,
            view.paused,
        )

    def state(self, now_ms: int) -> str:
        if self.fixed_state is not None:
            return self.fixed_state
        assert self.behind_after_ms is not None
        return "catching up" if now_ms > self.behind_after_ms else "live"

    def to_json(self, now_ms: int) -> dict[str, Any]:
        window = self.window
        return {
            "stream_id": self.stream_id,
            "state": self.state(now_ms),
            "lag_ms": None if self.downstream_ms is None else now_ms - self.downstream_ms,
            "downstream_ms": self.downstream_ms,
            "last_commit_ms": self.last_commit_ms,
            "window": None if window is None else {"start_ms": window[0], "end_ms": window[1]},
            "attempt": self.attempt,
            "last_error": self.last_error,
            "bypasses": self.bypasses,
            "paused": self.paused,
        }
