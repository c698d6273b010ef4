"""The `streams` topic (compacted): a stream's current view, keyed by `stream_key`."""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

import orjson
from pydantic import Field

from streams.core import ErrorInfo, config_from_dict, config_to_dict
from streams.core._checks import MAX_SAFE_INT
from streams.core.config import check_params
from streams.core.view import PublishedView, Status
from streams.errors import InvalidInput
from streams.wire.base import ErrorModel, Ms, StreamId, Wire, validated
from streams.wire.config import ConfigModel


class WindowModel(Wire):
    start_ms: Ms
    end_ms: Ms


class ViewMessage(Wire):
    """A stream's current view (compacted, keyed by stream_id; a tombstone once deleted)."""

    stream_id: StreamId
    config: ConfigModel
    status: Status = Field(
        description="paused, retrying and finished as published; live or catching up by the "
        "lag at the time of reading (behind by more than 2 * window_ms + delay_ms)"
    )
    downstream_ms: Ms = Field(description="as announced on commits")
    window: WindowModel | None = Field(description="the first outstanding window")
    attempt: Annotated[int, Field(ge=0, description="its last attempt; 0: not dispatched yet")]
    last_error: ErrorModel | None = Field(description="of the latest outstanding window's failure")
    bypasses: Annotated[int, Field(ge=0, description="windows bypassed since its creation")]
    committed_ms: Ms | None = Field(description="when downstream_ms last moved")
    incarnation: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]
    changed_ms: Ms = Field(description="when the view was published")
    held_since_ms: Ms | None = Field(
        default=None,
        description=(
            "present while the outage guard holds the bypass of an outstanding window: when "
            "its oldest open hold began (kept until that window closes)"
        ),
    )
    waiting_since_ms: Ms | None = Field(
        default=None,
        description=(
            "present while a due window waits for its source's admission (its limits: "
            "`tidemark sources`): since when the oldest one waits"
        ),
    )


def encode_view(view: PublishedView, config_json: orjson.Fragment | None = None) -> bytes:
    """The `streams` value of `view`; `config_json`, when given, is its config's JSON already
    encoded. `decode_view` inverts it."""
    config: Any = config_to_dict(view.config) if config_json is None else config_json
    return orjson.dumps(
        {
            "stream_id": view.stream_id,
            "config": config,
            **view.body(),
            "changed_ms": view.changed_ms,
        }
    )


class Viewed(NamedTuple):
    """A decoded `streams` record: the stream its key names, and its view (None: a tombstone)."""

    stream_id: str
    view: PublishedView | None


def decode_view(key: bytes | None, raw: bytes | None) -> Viewed:
    """A `streams` record, or InvalidInput naming the field; the key must be the stream id."""
    if key is None:
        raise InvalidInput("key", "is required")
    try:
        stream_id = key.decode()
    except UnicodeDecodeError:
        raise InvalidInput("key", "is not UTF-8") from None
    if raw is None:
        return Viewed(stream_id, None)
    msg = validated(ViewMessage.model_validate_json, raw)
    if msg.stream_id != stream_id:
        raise InvalidInput("key", "must be the value's stream_id")
    if msg.config.stream_id != stream_id:
        raise InvalidInput("config.stream_id", "must be the view's stream_id")
    check_params(msg.config.params)
    window, error = msg.window, msg.last_error
    view = PublishedView(
        config_from_dict(msg.config.model_dump()),
        msg.status,
        msg.downstream_ms,
        None if window is None else (window.start_ms, window.end_ms),
        msg.attempt,
        None if error is None else ErrorInfo(error.kind, error.message),
        msg.bypasses,
        msg.committed_ms,
        msg.incarnation,
        msg.changed_ms,
        msg.held_since_ms,
        msg.waiting_since_ms,
    )
    return Viewed(stream_id, view)
