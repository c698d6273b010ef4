"""The `control` topic: upserts, pauses, resumes, deletes and replays, keyed by `stream_key`, and
a source's `source_set` and `source_delete`, keyed by `source_control_key` (wire.sources)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from streams.core import (
    Control,
    Delete,
    Pause,
    Replay,
    Resume,
    Upsert,
    config_from_dict,
    config_to_dict,
)
from streams.core.admission import SourceControl, SourceDelete, SourceSet
from streams.core.config import check_params
from streams.errors import InvalidInput
from streams.wire.base import VARIANTS, Ms, StreamId, Wire, validated
from streams.wire.config import ConfigModel
from streams.wire.sources import (
    SourceDeleteControl,
    SourceSetControl,
    source_control,
    source_control_dict,
)


class UpsertControl(ConfigModel):
    """Create a stream or change its config (start_ms and paused only apply on creation)."""

    type: Literal["upsert"]
    paused: bool = Field(
        default=False,
        description="create the stream paused: nothing is dispatched until a resume "
        "(ignored for a stream that exists: its paused flag is kept)",
    )


class StreamControl(Wire):
    type: Literal["pause", "resume", "delete"]
    stream_id: StreamId


class ReplayControl(Wire):
    """Dispatch the stream's bypassed windows overlapping (from_ms, to_ms] again."""

    type: Literal["replay"]
    stream_id: StreamId
    from_ms: Ms
    to_ms: Ms


AnyControl = UpsertControl | StreamControl | ReplayControl | SourceSetControl | SourceDeleteControl
ControlModel = Annotated[AnyControl, Field(discriminator="type")]
CONTROL_ADAPTER: TypeAdapter[AnyControl] = TypeAdapter(ControlModel)


def decode_control(raw: bytes | None) -> Control | Replay | SourceControl:
    """A `control` value as the core's Control (or Replay, SourceSet, SourceDelete), or
    InvalidInput naming the field."""
    msg = validated(CONTROL_ADAPTER.validate_json, raw, VARIANTS)
    if isinstance(msg, SourceSetControl | SourceDeleteControl):
        return source_control(msg)
    if isinstance(msg, ReplayControl):
        if msg.to_ms <= msg.from_ms:
            raise InvalidInput("to_ms", "must be after from_ms")
        return Replay(msg.stream_id, msg.from_ms, msg.to_ms)
    if isinstance(msg, StreamControl):
        if msg.type == "pause":
            return Pause(msg.stream_id)
        return Resume(msg.stream_id) if msg.type == "resume" else Delete(msg.stream_id)
    # What every task and state can carry: no NaN or Infinity (which the parser lets through), no
    # integer beyond 2**53 (orjson refuses past 2**64), a bounded size and depth.
    check_params(msg.params)
    # The core applies the semantic rules (window_ms a multiple of step_ms, ...).
    return Upsert(config_from_dict(msg.model_dump()), paused=msg.paused)


def encode_control(control: Control | Replay | SourceControl) -> bytes:
    """The `control` value of `control`; `decode_control` inverts it."""
    value: dict[str, Any]
    if isinstance(control, SourceSet | SourceDelete):
        value = source_control_dict(control)
    elif isinstance(control, Upsert):
        value = {"type": "upsert", **config_to_dict(control.config)}
        if control.paused:  # only when set: what an older coordinator reads stays the same
            value["paused"] = True
    elif isinstance(control, Replay):
        value = {
            "type": "replay",
            "stream_id": control.stream_id,
            "from_ms": control.from_ms,
            "to_ms": control.to_ms,
        }
    else:
        value = {"type": _CONTROL_TYPES[type(control)], "stream_id": control.stream_id}
    # allow_nan=False: a NaN in params is refused here rather than sent.
    return json.dumps(value, allow_nan=False).encode()


_CONTROL_TYPES = {Pause: "pause", Resume: "resume", Delete: "delete"}
