"""A fake read model for the status page's in-process tests: fixed views, records its calls."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class FakeStream:
    stream_id: str
    downstream_ms: int | None = None
    state_name: str = "live"
    window: tuple[int, int] | None = None
    attempt: int = 0
    last_error: dict[str, str] | None = None
    bypasses: int = 0
    paused: bool = False
    last_commit_ms: int | None = None
    config: dict[str, object] | None = None
    behind_ms: int | None = None  # set: live or catching up by the lag, as a real view is
    held_since_ms: int | None = None
    pipeline: str = "default"

    def lag_ms(self, now_ms: int) -> int | None:
        return None if self.downstream_ms is None else now_ms - self.downstream_ms

    def state(self, now_ms: int) -> str:
        after = self.catching_up_after_ms()
        if after is None:
            return self.state_name
        return "catching up" if now_ms > after else "live"

    def catching_up_after_ms(self) -> int | None:
        if self.behind_ms is None or self.downstream_ms is None:
            return None
        return self.downstream_ms + self.behind_ms


@dataclass(frozen=True)
class FakeBypass:
    stream_id: str
    start_ms: int
    end_ms: int
    attempts: int = 3
    first_failed_ms: int = 0
    bypassed_ms: int = 0
    last_error: dict[str, str] | None = None

    def replay_command(self) -> str:
        return f"tidemark replay {self.stream_id} --from {self.start_ms} --to {self.end_ms}"


@dataclass
class FakeReadModel:
    """Serves `views` and `bypass_views`; `fail_with` makes the next refreshes raise."""

    views: list[FakeStream] = field(default_factory=list)
    bypass_views: list[FakeBypass] = field(default_factory=list)
    fail_with: Exception | None = None
    refreshes: int = 0
    limits: list[int | None] = field(default_factory=list)
    closed: bool = False
    refreshed: threading.Event = field(default_factory=threading.Event)
    caught_up: bool = True
    _shown: set[str] = field(default_factory=set)  # the ids changes() last returned

    def refresh(self, timeout_s: float = 5.0) -> None:
        self.refreshes += 1
        if self.fail_with is not None:
            raise self.fail_with
        self.refreshed.set()

    def changes(self) -> tuple[list[FakeStream], list[str]]:
        """Every view (the table skips those unchanged), and the ids gone since last time."""
        views = list(self.views)
        ids = {view.stream_id for view in views}
        removed, self._shown = sorted(self._shown - ids), ids
        return views, removed

    def stream(self, stream_id: str) -> FakeStream | None:
        return next((view for view in self.views if view.stream_id == stream_id), None)

    def bypasses(self, limit: int | None = None) -> list[FakeBypass]:
        self.limits.append(limit)
        return list(self.bypass_views)

    def bypasses_of(self, stream_id: str) -> list[FakeBypass]:
        return [b for b in self.bypass_views if b.stream_id == stream_id]

    def close(self) -> None:
        self.closed = True
