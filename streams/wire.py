"""The wire contract: pydantic models of every topic's JSON value, and the boundary decoders.

Inputs (`control`, `results`) are validated here; anything invalid raises InvalidInput naming
the field, and the coordinator sends it to `rejected`. Outputs (`tasks`, `commits`, `bypassed`,
`rejected`) are modelled for their JSON Schemas and contract tests; the core renders them.
`python -m streams.wire` writes `schemas/*.schema.json` from these models.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from streams.core import (
    Control,
    Delete,
    ErrorInfo,
    Pause,
    Replay,
    Result,
    Resume,
    Upsert,
    config_from_dict,
)
from streams.core._checks import (
    MAX_DURATION_MS,
    MAX_ERROR_KIND_CHARS,
    MAX_ERROR_MESSAGE_CHARS,
    MAX_MS,
    MAX_SAFE_INT,
    MAX_TIME_MS,
)
from streams.core.config import (
    MAX_IN_FLIGHT,
    MAX_NON_RETRYABLE,
    MAX_PARAMS_BYTES,
    MAX_PARAMS_DEPTH,
    check_params,
)
from streams.errors import InvalidInput

MAX_RAW_BYTES = 4096

Ms = Annotated[int, Field(ge=0, le=MAX_MS, description="epoch milliseconds (UTC)")]
# A config's times and durations are bounded further, so that every time the core computes from
# them stays within MAX_MS (streams/core/_checks.py says why).
StartMs = Annotated[
    int, Field(ge=0, le=MAX_TIME_MS, description="epoch milliseconds (UTC), at most year 9999")
]
Duration = Annotated[int, Field(gt=0, le=MAX_DURATION_MS, description="milliseconds, <= 10 years")]
Count = Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]
StreamId = Annotated[str, Field(min_length=1, max_length=200)]


class _Wire(BaseModel):
    # strict: "60" is not 60 and true is not 1; extra fields are allowed and ignored.
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class ImmediateRetry(_Wire):
    strategy: Literal["immediate"]


class FixedRetry(_Wire):
    strategy: Literal["fixed"]
    interval_ms: Duration


class ExponentialRetry(_Wire):
    strategy: Literal["exponential"]
    initial_ms: Duration
    multiplier: float = Field(ge=1)
    max_ms: Duration
    jitter: float = Field(default=0.0, ge=0, le=1)


RetryModel = Annotated[
    ImmediateRetry | FixedRetry | ExponentialRetry, Field(discriminator="strategy")
]


class UpsertControl(_Wire):
    """Create a stream or change its config (start_ms only applies on creation)."""

    type: Literal["upsert"]
    stream_id: StreamId
    start_ms: StartMs
    window_ms: Duration = 60000
    step_ms: Duration = 15000
    delay_ms: Annotated[int, Field(ge=0, le=MAX_DURATION_MS)] = 0
    task_timeout_ms: Duration = 60000
    bypass_after_ms: Duration = 300000
    retry: RetryModel = FixedRetry(strategy="fixed", interval_ms=60000)
    max_attempts: Count | None = None
    non_retryable: Annotated[
        list[Annotated[str, Field(max_length=MAX_ERROR_KIND_CHARS)]],
        Field(max_length=MAX_NON_RETRYABLE),
    ] = []
    max_in_flight: Annotated[int, Field(ge=1, le=MAX_IN_FLIGHT)] = 1
    params: dict[str, Any] = Field(
        default={},
        description=(
            f"handed to the workers: integers within ±(2**53 - 1), nesting at most "
            f"{MAX_PARAMS_DEPTH} deep, at most {MAX_PARAMS_BYTES} bytes as compact JSON"
        ),
    )


class StreamControl(_Wire):
    type: Literal["pause", "resume", "delete"]
    stream_id: StreamId


class ReplayControl(_Wire):
    """Dispatch the stream's bypassed windows overlapping (from_ms, to_ms] again."""

    type: Literal["replay"]
    stream_id: StreamId
    from_ms: Ms
    to_ms: Ms


ControlModel = Annotated[UpsertControl | StreamControl | ReplayControl, Field(discriminator="type")]


class ErrorModel(_Wire):
    # Cut at decode rather than refused: a worker's failure still counts.
    kind: str = Field(min_length=1, description=f"cut to {MAX_ERROR_KIND_CHARS} characters")
    message: str = Field(default="", description=f"cut to {MAX_ERROR_MESSAGE_CHARS} characters")


class _ResultBase(_Wire):
    stream_id: StreamId
    start_ms: Ms
    end_ms: Ms
    attempt: Count


class AckResult(_ResultBase):
    outcome: Literal["ack"]
    ack_ms: Ms


class NackResult(_ResultBase):
    outcome: Literal["nack"]
    error: ErrorModel


class HeartbeatResult(_ResultBase):
    outcome: Literal["heartbeat"]


ResultModel = Annotated[AckResult | NackResult | HeartbeatResult, Field(discriminator="outcome")]


class TaskMessage(_Wire):
    task_id: str
    stream_id: StreamId
    start_ms: Ms
    end_ms: Ms
    step_ms: Duration
    attempt: Annotated[int, Field(ge=1)]
    dispatched_ms: Ms
    deadline_ms: Ms
    params: dict[str, Any]
    replay: bool = Field(default=False, description="a bypassed window dispatched again")


class CommittedWindowModel(_Wire):
    start_ms: Ms
    end_ms: Ms
    reason: Literal["ack", "bypass", "replayed"]
    attempts: Annotated[int, Field(ge=0)]


class CommitMessage(_Wire):
    stream_id: StreamId
    downstream_ms: Ms
    previous_ms: Ms
    committed_ms: Ms
    windows: list[CommittedWindowModel]


class BypassedMessage(_Wire):
    stream_id: StreamId
    start_ms: Ms
    end_ms: Ms
    attempts: Annotated[int, Field(ge=0)]
    first_failed_ms: Ms
    bypassed_ms: Ms
    last_error: ErrorModel | None


class RejectedMessage(_Wire):
    source_topic: str
    partition: int
    offset: int
    reason: str
    key: str | None
    value: str | None = Field(description=f"the raw value, cut to {MAX_RAW_BYTES} bytes")


_CONTROL: TypeAdapter[UpsertControl | StreamControl | ReplayControl] = TypeAdapter(ControlModel)
_RESULT: TypeAdapter[AckResult | NackResult | HeartbeatResult] = TypeAdapter(ResultModel)
_TAGS = {
    "type": "upsert, pause, resume, delete, replay",
    "outcome": "ack, nack, heartbeat",
    "strategy": "immediate, fixed, exponential",
}


def _reason(exc: ValidationError) -> InvalidInput:
    """The first validation error as InvalidInput(field, reason)."""
    err = exc.errors(include_url=False)[0]
    # Drop union tags ("ack", "upsert", ...) from the location; keep field names and indexes.
    loc = [str(p) for p in err["loc"] if not (isinstance(p, str) and p in _VARIANTS)]
    if err["type"] in ("union_tag_not_found", "union_tag_invalid"):
        tag = err.get("ctx", {}).get("discriminator", "").strip("'")
        missing = err["type"] == "union_tag_not_found"
        return InvalidInput(
            ".".join([*loc, tag]),
            f"{'is required' if missing else 'is not valid'}; one of {_TAGS.get(tag, '?')}",
        )
    if err["type"] == "json_invalid":
        return InvalidInput("value", f"not valid JSON ({err['msg']})")
    return InvalidInput(".".join(loc) or "value", err["msg"])


_VARIANTS = {
    "upsert",
    "pause",
    "resume",
    "delete",
    "replay",
    "ack",
    "nack",
    "heartbeat",
    "immediate",
    "fixed",
    "exponential",
    "function-after[_ensure_object()]",
}


def decode_result(raw: bytes | None) -> Result:
    """A `results` value as the core's Result, or InvalidInput naming the field."""
    if raw is None:
        raise InvalidInput("value", "is empty")
    try:
        msg = _RESULT.validate_json(raw)
    except ValidationError as exc:
        raise _reason(exc) from None
    if msg.end_ms <= msg.start_ms:
        raise InvalidInput("end_ms", "must be after start_ms")
    if isinstance(msg, AckResult):
        return Result(msg.stream_id, msg.start_ms, msg.end_ms, msg.attempt, "ack", msg.ack_ms)
    if isinstance(msg, NackResult):
        error = ErrorInfo(msg.error.kind[:MAX_ERROR_KIND_CHARS], _cut(msg.error.message))
        return Result(msg.stream_id, msg.start_ms, msg.end_ms, msg.attempt, "nack", error=error)
    return Result(msg.stream_id, msg.start_ms, msg.end_ms, msg.attempt, "heartbeat")


def _cut(message: str) -> str:
    """`message` cut to MAX_ERROR_MESSAGE_CHARS, ending with "…" when it was longer."""
    if len(message) <= MAX_ERROR_MESSAGE_CHARS:
        return message
    return message[: MAX_ERROR_MESSAGE_CHARS - 1] + "…"


def decode_control(raw: bytes | None) -> Control | Replay:
    """A `control` value as the core's Control, or InvalidInput naming the field."""
    if raw is None:
        raise InvalidInput("value", "is empty")
    try:
        msg = _CONTROL.validate_json(raw)
    except ValidationError as exc:
        raise _reason(exc) from None
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
    return Upsert(config_from_dict(msg.model_dump()))


def rejected_value(
    topic: str, partition: int, offset: int, reason: str, key: bytes | None, value: bytes | None
) -> bytes:
    """The `rejected` record for an input, with the raw key and value cut to 4 KiB."""

    def text(raw: bytes | None) -> str | None:
        return None if raw is None else raw[:MAX_RAW_BYTES].decode("utf-8", "replace")

    return json.dumps(
        {
            "source_topic": topic,
            "partition": partition,
            "offset": offset,
            "reason": reason,
            "key": text(key),
            "value": text(value),
        }
    ).encode()


SCHEMAS: dict[str, Any] = {
    "control": _CONTROL,
    "results": _RESULT,
    "tasks": TaskMessage,
    "commits": CommitMessage,
    "bypassed": BypassedMessage,
    "rejected": RejectedMessage,
}


def json_schema(topic: str) -> dict[str, Any]:
    model = SCHEMAS[topic]
    schema: dict[str, Any] = (
        model.json_schema() if isinstance(model, TypeAdapter) else (model.model_json_schema())
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"tidemark {topic} value",
        **schema,
    }


def write_schemas(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for topic in SCHEMAS:
        path = folder / f"{topic}.schema.json"
        path.write_text(json.dumps(json_schema(topic), indent=2, sort_keys=True) + "\n")
        paths.append(path)
    return paths


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[1] / "schemas"
    for written in write_schemas(target):
        print(written)
