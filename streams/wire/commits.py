"""The `commits` topic: a stream's announcement that downstream_ms moved, keyed by `stream_key`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from streams.core import Commit, CommittedWindow
from streams.core._checks import MAX_MS
from streams.core.model import to_json
from streams.wire.base import Ms, StreamId, Wire, validated


class CommittedWindowModel(Wire):
    start_ms: Ms
    end_ms: Ms
    reason: Literal["ack", "bypass", "replayed"]
    attempts: int = Field(
        ge=0,
        description=(
            "dispatches of the window, the closing one and shutdowns included "
            "(a bypassed record's attempts counts failures instead)"
        ),
    )
    held_ms: Annotated[int, Field(ge=0, le=MAX_MS)] | None = Field(
        default=None,
        description=(
            "present when the outage guard held the window's bypass: how long it was held "
            "before it closed, so that delayed data can be told from live data"
        ),
    )


class CommitMessage(Wire):
    stream_id: StreamId
    downstream_ms: Ms
    previous_ms: Ms
    committed_ms: Ms
    windows: list[CommittedWindowModel]


def encode_commit(commit: Commit) -> bytes:
    """The `commits` value of `commit`; `decode_commit` inverts it (see `encode_task`)."""
    return to_json(commit)


def decode_commit(raw: bytes | None) -> Commit:
    """A `commits` value as the core's Commit, or InvalidInput naming the field."""
    msg = validated(CommitMessage.model_validate_json, raw)
    windows = tuple(
        CommittedWindow(w.start_ms, w.end_ms, w.reason, w.attempts, w.held_ms) for w in msg.windows
    )
    return Commit(msg.stream_id, msg.downstream_ms, msg.previous_ms, msg.committed_ms, windows)
