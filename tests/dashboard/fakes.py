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
    held_since_ms: int | None = None

    def lag_ms(self, now_ms: int) -> int | None:
        return None if self.downstream_ms is None else now_ms - self.downstream_ms

    def state(self, now_ms: int) -> str:
        return self.state_name


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

    def refresh(self, timeout_s: float = 5.0) -> None:
        self.refreshes += 1
        if self.fail_with is not None:
            raise self.fail_with
        self.refreshed.set()

    def streams(self) -> list[FakeStream]:
        return list(self.views)

    def bypasses(self, limit: int | None = None) -> list[FakeBypass]:
        self.limits.append(limit)
        return list(self.bypass_views)

    def bypasses_of(self, stream_id: str) -> list[FakeBypass]:
        return [b for b in self.bypass_views if b.stream_id == stream_id]

    def close(self) -> None:
        self.closed = True
