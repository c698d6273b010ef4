"""Shared builders for the core tests: the seed's clock and results made from tasks."""

from __future__ import annotations

from typing import Any

from streams.core import (
    Decision,
    ErrorInfo,
    Result,
    StreamConfig,
    StreamState,
    Task,
    create_state,
    state_to_dict,
)

T0 = 1_795_946_400_000  # 2026-11-29T10:00:00Z
SECOND_MS = 1_000
MINUTE_MS = 60_000


def at(hour: int, minute: int, second: int = 0) -> int:
    """Epoch ms of hour:minute:second UTC on 2026-11-29 (the seed's day)."""
    return T0 + ((hour - 10) * 3600 + minute * 60 + second) * SECOND_MS


def config(**overrides: Any) -> StreamConfig:
    fields: dict[str, Any] = {"stream_id": "cluster-a", "start_ms": at(10, 0)}
    fields.update(overrides)
    return StreamConfig(**fields)


def started(now_ms: int, **overrides: Any) -> tuple[StreamState, tuple[Task, ...]]:
    """A new stream created at `now_ms`, and the tasks that creation dispatched."""
    decision = create_state(config(**overrides), now_ms)
    assert decision.state is not None and decision.rejected is None
    return decision.state, decision.tasks


def only(decision: Decision) -> Task:
    """The single task a decision dispatched."""
    assert decision.rejected is None, decision.rejected
    assert len(decision.tasks) == 1, decision.tasks
    return decision.tasks[0]


def ack(task: Task, ack_ms: int | None = None, attempt: int | None = None) -> Result:
    return Result(
        task.stream_id,
        task.start_ms,
        task.end_ms,
        task.attempt if attempt is None else attempt,
        "ack",
        ack_ms=task.end_ms if ack_ms is None else ack_ms,
    )


def nack(task: Task, kind: str = "no_data", attempt: int | None = None) -> Result:
    return Result(
        task.stream_id,
        task.start_ms,
        task.end_ms,
        task.attempt if attempt is None else attempt,
        "nack",
        error=ErrorInfo(kind, f"{kind} in {task.task_id}"),
    )


def heartbeat(task: Task, attempt: int | None = None) -> Result:
    attempt = task.attempt if attempt is None else attempt
    return Result(task.stream_id, task.start_ms, task.end_ms, attempt, "heartbeat")


def bounds(state: StreamState) -> list[tuple[int, int]]:
    return [(window.start_ms, window.end_ms) for window in state.windows]


def snapshot(state: StreamState) -> dict[str, Any]:
    return state_to_dict(state)
