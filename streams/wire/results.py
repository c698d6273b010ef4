"""The `results` topic: a worker's ack, nack or heartbeat of a task, keyed by `stream_key`."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

import msgspec
from msgspec.structs import replace as struct_replace
from pydantic import Field, TypeAdapter

from streams.core import NACK_WITHOUT_ERROR, ErrorInfo, Result
from streams.core._checks import (
    MAX_ERROR_KIND_CHARS,
    MAX_ERROR_MESSAGE_CHARS,
    MAX_MS,
    MAX_SAFE_INT,
)
from streams.core.config import MAX_PIPELINE_CHARS, MAX_STREAM_ID_CHARS, PIPELINE_PATTERN
from streams.errors import InvalidInput
from streams.wire.base import (
    VARIANTS,
    Count,
    ErrorModel,
    Incarnation,
    Ms,
    Pipeline,
    StreamId,
    Wire,
    validated,
)


class _ResultBase(Wire):
    stream_id: StreamId
    start_ms: Ms
    end_ms: Ms
    attempt: Count
    incarnation: Incarnation
    pipeline: Pipeline | None = Field(
        default=None,
        description=(
            "the worker's pipeline: a result for a stream of another pipeline is rejected; "
            "absent: the default pipeline's (a worker older than pipelines)"
        ),
    )


class AckResult(_ResultBase):
    outcome: Literal["ack"]
    ack_ms: Ms


class NackResult(_ResultBase):
    outcome: Literal["nack"]
    error: ErrorModel


class HeartbeatResult(_ResultBase):
    outcome: Literal["heartbeat"]


ResultModel = Annotated[AckResult | NackResult | HeartbeatResult, Field(discriminator="outcome")]
RESULT_ADAPTER: TypeAdapter[AckResult | NackResult | HeartbeatResult] = TypeAdapter(ResultModel)


def decode_result(raw: bytes | None) -> Result:
    """A `results` value as the core's Result, or InvalidInput naming the field."""
    result = _plain_result(raw)
    return _validated_result(raw) if result is None else result


def _plain_result(raw: bytes | None) -> Result | None:
    """The Result of a plainly valid `results` value, or None to leave it to the models.

    The hot path: msgspec decodes the JSON straight into the core's Result, checking each
    field's type in C, and a few bounds follow here; a fraction of the pydantic validation
    (an ack in 7,400 instructions, against 16,300 with orjson and checks on a dict; callgrind).
    It accepts only what `ResultModel` accepts and builds the same Result
    (tests/test_wire_plain.py compares them); anything else, malformed or merely unusual (a
    field of the wrong type even where the models ignore it, an error without its message),
    returns None.
    """
    if raw is None:
        return None
    try:
        result = _decode_plain_result(raw)
    except msgspec.DecodeError:  # ValidationError too
        return None
    start_ms, end_ms, attempt, incarnation, pipeline = (
        result.start_ms, result.end_ms, result.attempt, result.incarnation, result.pipeline
    )  # fmt: skip
    if (
        not 0 < len(result.stream_id) <= MAX_STREAM_ID_CHARS
        or not 0 <= start_ms < end_ms <= MAX_MS
        or not 1 <= attempt <= MAX_SAFE_INT
        or (incarnation is not None and not 0 <= incarnation <= MAX_SAFE_INT)
        or (
            pipeline is not None
            and not (len(pipeline) <= MAX_PIPELINE_CHARS and _PIPELINE.fullmatch(pipeline))
        )
    ):
        return None
    outcome, ack_ms, error = result.outcome, result.ack_ms, result.error
    if outcome == "ack":
        if ack_ms is None or not 0 <= ack_ms <= MAX_MS:
            return None
        return result if error is None else struct_replace(result, error=None)
    if outcome == "heartbeat":
        if ack_ms is None and error is None:
            return result
        return struct_replace(result, ack_ms=None, error=None)
    if error is None or not error.kind:
        return None
    kind, message = error.kind, error.message
    if (
        ack_ms is None
        and len(kind) <= MAX_ERROR_KIND_CHARS
        and len(message) <= MAX_ERROR_MESSAGE_CHARS
    ):
        return result
    error = ErrorInfo(kind[:MAX_ERROR_KIND_CHARS], _cut(message))
    return struct_replace(result, ack_ms=None, error=error)


# A pipeline as the models accept it (with its length), checked on the plain path.
_PIPELINE = re.compile(PIPELINE_PATTERN)
# Typed fields only: the models' bounds and the outcome's rules are checked by `_plain_result`.
_decode_plain_result = msgspec.json.Decoder(Result).decode


def _validated_result(raw: bytes | None) -> Result:
    """`decode_result` through the pydantic models: every value the plain path leaves."""
    msg = validated(RESULT_ADAPTER.validate_json, raw, VARIANTS)
    if msg.end_ms <= msg.start_ms:
        raise InvalidInput("end_ms", "must be after start_ms")
    stream_id, start_ms, end_ms, attempt, incarnation, pipeline = (
        msg.stream_id,
        msg.start_ms,
        msg.end_ms,
        msg.attempt,
        msg.incarnation,
        msg.pipeline,
    )
    if isinstance(msg, AckResult):
        ack_ms = msg.ack_ms
        return Result(
            stream_id, start_ms, end_ms, attempt, "ack", ack_ms, None, incarnation, pipeline
        )
    if isinstance(msg, NackResult):
        error = ErrorInfo(msg.error.kind[:MAX_ERROR_KIND_CHARS], _cut(msg.error.message))
        return Result(
            stream_id, start_ms, end_ms, attempt, "nack", None, error, incarnation, pipeline
        )
    return Result(
        stream_id, start_ms, end_ms, attempt, "heartbeat", None, None, incarnation, pipeline
    )


def _cut(message: str) -> str:
    """`message` cut to MAX_ERROR_MESSAGE_CHARS, ending with "…" when it was longer."""
    if len(message) <= MAX_ERROR_MESSAGE_CHARS:
        return message
    return message[: MAX_ERROR_MESSAGE_CHARS - 1] + "…"


def encode_result(result: Result) -> bytes:
    """The `results` value of `result`; `decode_result` inverts it (cutting a long error)."""
    value: dict[str, Any] = {
        "stream_id": result.stream_id,
        "start_ms": result.start_ms,
        "end_ms": result.end_ms,
        "attempt": result.attempt,
        "outcome": result.outcome,
    }
    if result.incarnation is not None:
        value["incarnation"] = result.incarnation
    if result.pipeline is not None:
        value["pipeline"] = result.pipeline
    if result.outcome == "ack":
        if result.ack_ms is None:
            raise InvalidInput("ack_ms", "is required for an ack")
        value["ack_ms"] = result.ack_ms
    elif result.outcome == "nack":
        value["error"] = (result.error or NACK_WITHOUT_ERROR).to_wire()
    try:  # the same bytes as json.dumps below, in C: 31,000 instructions fewer (callgrind)
        return _encode_json(value)
    except UnicodeEncodeError:
        pass
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    # A handler's kind or message may hold lone surrogates (e.g. an OS error's text); they
    # cannot be UTF-8, so they become "?" rather than an exception in the worker's loop.
    return text.encode("utf-8", "replace")


_encode_json = msgspec.json.Encoder().encode
