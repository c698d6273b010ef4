"""The wire contract: pydantic models of every topic's JSON value, and its one codec.

Every reader and writer of a topic goes through the functions here, both directions:

| topic    | key                              | write             | read                        |
|----------|----------------------------------|-------------------|-----------------------------|
| control  | `stream_key(stream_id)`          | `encode_control`  | `decode_control`            |
| tasks    | `stream_key(stream_id)`          | `encode_task`     | `decode_task`               |
| results  | `stream_key(stream_id)`          | `encode_result`   | `decode_result`             |
| commits  | `stream_key(stream_id)`          | `encode_commit`   | `decode_commit`             |
| bypassed | `bypassed_key(stream_id, start)` | `encode_bypassed` | `decode_bypassed(key, raw)` |
| streams  | `stream_key(stream_id)`          | `encode_view`     | `decode_view(key, raw)`     |
| rejected | the input's raw key              | `rejected_value`  | `decode_rejected`           |
| health   | `health_key(partition)`          | `encode_health`   | `decode_health(key, raw)`   |

A decoder raises InvalidInput naming the field; the coordinator sends an invalid input to
`rejected`, the read model ignores it. The core's value types are what the codec reads into and
writes from (their `to_wire` renders the output dicts; tasks and commits, msgspec Structs, are
encoded straight from their fields in the same shape). `python -m streams.wire` writes
`schemas/*.schema.json` from these models.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Collection
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal, NamedTuple, TypeVar

import msgspec
import orjson
from msgspec.structs import replace as struct_replace
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from streams.core import (
    NACK_WITHOUT_ERROR,
    BypassRecord,
    Commit,
    CommittedWindow,
    Control,
    Delete,
    ErrorInfo,
    Pause,
    Replay,
    Result,
    Resume,
    Task,
    Upsert,
    bypass_key,
    config_from_dict,
    config_to_dict,
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
    DEFAULT_BYPASS_RETENTION_MS,
    DEFAULT_GC_GRACE_MS,
    MAX_IN_FLIGHT,
    MAX_NON_RETRYABLE,
    MAX_PARAMS_BYTES,
    MAX_PARAMS_DEPTH,
    MAX_SOURCE_CHARS,
    check_params,
)
from streams.core.model import to_json
from streams.core.view import PublishedView, Status
from streams.errors import InvalidInput

MAX_RAW_BYTES = 4096
MAX_STREAM_ID_CHARS = 200

Ms = Annotated[int, Field(ge=0, le=MAX_MS, description="epoch milliseconds (UTC)")]
# A config's times and durations are bounded further, so that every time the core computes from
# them stays within MAX_MS (streams/core/_checks.py says why).
StartMs = Annotated[
    int, Field(ge=0, le=MAX_TIME_MS, description="epoch milliseconds (UTC), at most year 9999")
]
Duration = Annotated[int, Field(gt=0, le=MAX_DURATION_MS, description="milliseconds, <= 10 years")]
Count = Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]
StreamId = Annotated[str, Field(min_length=1, max_length=MAX_STREAM_ID_CHARS)]
Incarnation = Annotated[
    int | None,
    Field(
        default=None,
        ge=0,
        le=MAX_SAFE_INT,
        description=(
            "which creation of the stream the task is for (a delete and re-create makes a new "
            "one); a result echoes its task's, and one without it counts as the current"
        ),
    ),
]


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


class ConfigModel(_Wire):
    """A stream's config (streams.core.config): an upsert's fields, and a view's `config`."""

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
    source: Annotated[str, Field(min_length=1, max_length=MAX_SOURCE_CHARS)] | None = Field(
        default=None,
        description=(
            "what the stream reads from (e.g. its query endpoint): the outage guard holds the "
            "bypasses of a source's streams while most of them fail together"
        ),
    )
    params: dict[str, Any] = Field(
        default={},
        description=(
            f"handed to the workers: integers within ±(2**53 - 1), nesting at most "
            f"{MAX_PARAMS_DEPTH} deep, at most {MAX_PARAMS_BYTES} bytes as compact JSON"
        ),
    )
    end_ms: StartMs | None = Field(
        default=None,
        description=(
            "a bounded stream: no window goes past it (a multiple of step_ms, after start_ms); "
            "once downstream_ms reaches it the stream is finished"
        ),
    )
    gc_grace_ms: Duration = Field(
        default=DEFAULT_GC_GRACE_MS,
        description="how long a finished or deleted stream's state is kept, then collected",
    )
    bypass_retention_ms: Duration = Field(
        default=DEFAULT_BYPASS_RETENTION_MS,
        description="how long a bypassed window stays listed (replayable), then tombstoned",
    )


class UpsertControl(ConfigModel):
    """Create a stream or change its config (start_ms only applies on creation)."""

    type: Literal["upsert"]


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
    incarnation: Incarnation


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
    task_id: str = Field(min_length=1, description="{stream_id}/{start_ms}/{attempt}")
    stream_id: StreamId
    start_ms: Ms
    end_ms: Ms
    step_ms: Duration
    attempt: Annotated[int, Field(ge=1)]
    dispatched_ms: Ms
    deadline_ms: Ms
    params: dict[str, Any]
    replay: bool = Field(
        default=False,
        description=(
            "a bypassed window dispatched again; its attempt follows every earlier one of the "
            "window, and only an ack of the whole window (ack_ms == end_ms) replays it"
        ),
    )
    incarnation: Incarnation


class CommittedWindowModel(_Wire):
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
    attempts: int = Field(
        ge=0,
        description=(
            "failed attempts (nacks and timeouts, not shutdowns; a committed window's attempts "
            "counts dispatches instead)"
        ),
    )
    first_failed_ms: Ms
    bypassed_ms: Ms
    last_error: ErrorModel | None


class WindowModel(_Wire):
    start_ms: Ms
    end_ms: Ms


class ViewMessage(_Wire):
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


class RejectedMessage(_Wire):
    source_topic: str
    partition: int
    offset: int
    reason: str
    key: str | None
    value: str | None = Field(description=f"the raw value, cut to {MAX_RAW_BYTES} bytes")


class SourceCountsModel(_Wire):
    failing: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]
    total: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]
    outage_since_ms: Ms | None = Field(
        default=None, description="since when the publisher has seen the source in outage"
    )


class HealthMessage(_Wire):
    """Per source, the failing and total streams of one partition, as its owner published them."""

    partition: Annotated[int, Field(ge=0)]
    owner: str = Field(max_length=400, description="the coordinator instance that owns it")
    published_ms: Ms
    sources: dict[Annotated[str, Field(min_length=1, max_length=200)], SourceCountsModel]


_CONTROL: TypeAdapter[UpsertControl | StreamControl | ReplayControl] = TypeAdapter(ControlModel)
_RESULT: TypeAdapter[AckResult | NackResult | HeartbeatResult] = TypeAdapter(ResultModel)
_TAGS = {
    "type": "upsert, pause, resume, delete, replay",
    "outcome": "ack, nack, heartbeat",
    "strategy": "immediate, fixed, exponential",
}


_Model = TypeVar("_Model")


def _validated(
    validate: Callable[[bytes], _Model], raw: bytes | None, tags: Collection[str] = frozenset()
) -> _Model:
    """`validate(raw)`, with an absent value and the first validation error as InvalidInput."""
    if raw is None:
        raise InvalidInput("value", "is empty")
    try:
        return validate(raw)
    except ValidationError as exc:
        raise _reason(exc, tags) from None


def _reason(exc: ValidationError, tags: Collection[str] = frozenset()) -> InvalidInput:
    """The first validation error as InvalidInput(field, reason).

    `tags`: the union tags of the model ("ack", "upsert", ...), dropped from the location, which
    keeps field names and indexes (a `tasks` field named "replay" is no tag).
    """
    err = exc.errors(include_url=False)[0]
    loc = [str(p) for p in err["loc"] if not (isinstance(p, str) and p in tags)]
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
    start_ms, end_ms, attempt, incarnation = (
        result.start_ms, result.end_ms, result.attempt, result.incarnation
    )  # fmt: skip
    if (
        not 0 < len(result.stream_id) <= MAX_STREAM_ID_CHARS
        or not 0 <= start_ms < end_ms <= MAX_MS
        or not 1 <= attempt <= MAX_SAFE_INT
        or (incarnation is not None and not 0 <= incarnation <= MAX_SAFE_INT)
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


# Typed fields only: the models' bounds and the outcome's rules are checked by `_plain_result`.
_decode_plain_result = msgspec.json.Decoder(Result).decode


def _validated_result(raw: bytes | None) -> Result:
    """`decode_result` through the pydantic models: every value the plain path leaves."""
    msg = _validated(_RESULT.validate_json, raw, _VARIANTS)
    if msg.end_ms <= msg.start_ms:
        raise InvalidInput("end_ms", "must be after start_ms")
    stream_id, start_ms, end_ms, attempt, incarnation = (
        msg.stream_id,
        msg.start_ms,
        msg.end_ms,
        msg.attempt,
        msg.incarnation,
    )
    if isinstance(msg, AckResult):
        return Result(stream_id, start_ms, end_ms, attempt, "ack", msg.ack_ms, None, incarnation)
    if isinstance(msg, NackResult):
        error = ErrorInfo(msg.error.kind[:MAX_ERROR_KIND_CHARS], _cut(msg.error.message))
        return Result(stream_id, start_ms, end_ms, attempt, "nack", None, error, incarnation)
    return Result(stream_id, start_ms, end_ms, attempt, "heartbeat", None, None, incarnation)


def _cut(message: str) -> str:
    """`message` cut to MAX_ERROR_MESSAGE_CHARS, ending with "…" when it was longer."""
    if len(message) <= MAX_ERROR_MESSAGE_CHARS:
        return message
    return message[: MAX_ERROR_MESSAGE_CHARS - 1] + "…"


def decode_control(raw: bytes | None) -> Control | Replay:
    """A `control` value as the core's Control, or InvalidInput naming the field."""
    msg = _validated(_CONTROL.validate_json, raw, _VARIANTS)
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


def encode_control(control: Control | Replay) -> bytes:
    """The `control` value of `control`; `decode_control` inverts it."""
    value: dict[str, Any]
    if isinstance(control, Upsert):
        value = {"type": "upsert", **config_to_dict(control.config)}
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


# -- keys ------------------------------------------------------------------------------------------


def stream_key(stream_id: str) -> bytes:
    """The key of `control`, `tasks`, `results` and `commits`: the stream id as UTF-8.

    Produced with the murmur2 partitioner, it puts a stream's records in its state's partition.
    """
    return stream_id.encode()


def bypassed_key(stream_id: str, start_ms: int) -> bytes:
    """The (compacted) `bypassed` key of a window: `{stream_id}/{start_ms}` as UTF-8."""
    return bypass_key(stream_id, start_ms).encode()


# -- tasks, results --------------------------------------------------------------------------------


def encode_task(task: Task) -> bytes:
    """The `tasks` value of `task`; `decode_task` inverts it.

    Straight from the Struct to JSON in C (`to_json`), not through the `to_wire` dict: 3,200
    instructions against 9,000 (callgrind; a commit 3,500 against 11,200)."""
    return to_json(task)


def decode_task(raw: bytes | None) -> Task:
    """A `tasks` value as the core's Task (params read-only), or InvalidInput naming the field."""
    msg = _validated(TaskMessage.model_validate_json, raw)
    if msg.end_ms <= msg.start_ms:
        raise InvalidInput("end_ms", "must be after start_ms")
    return Task(
        msg.task_id,
        msg.stream_id,
        msg.start_ms,
        msg.end_ms,
        msg.step_ms,
        msg.attempt,
        msg.dispatched_ms,
        msg.deadline_ms,
        MappingProxyType(msg.params),
        msg.replay,
        msg.incarnation,
    )


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
    if result.outcome == "ack":
        if result.ack_ms is None:
            raise InvalidInput("ack_ms", "is required for an ack")
        value["ack_ms"] = result.ack_ms
    elif result.outcome == "nack":
        value["error"] = (result.error or NACK_WITHOUT_ERROR).to_wire()
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    # A handler's kind or message may hold lone surrogates (e.g. an OS error's text); they
    # cannot be UTF-8, so they become "?" rather than an exception in the worker's loop.
    return text.encode("utf-8", "replace")


# -- commits, bypassed, rejected -------------------------------------------------------------------


def encode_commit(commit: Commit) -> bytes:
    """The `commits` value of `commit`; `decode_commit` inverts it (see `encode_task`)."""
    return to_json(commit)


def decode_commit(raw: bytes | None) -> Commit:
    """A `commits` value as the core's Commit, or InvalidInput naming the field."""
    msg = _validated(CommitMessage.model_validate_json, raw)
    windows = tuple(
        CommittedWindow(w.start_ms, w.end_ms, w.reason, w.attempts, w.held_ms) for w in msg.windows
    )
    return Commit(msg.stream_id, msg.downstream_ms, msg.previous_ms, msg.committed_ms, windows)


def encode_bypassed(record: BypassRecord) -> bytes:
    """The `bypassed` value of `record`, keyed by `bypassed_key`; `decode_bypassed` inverts it."""
    return orjson.dumps(record.to_wire())


class Bypassed(NamedTuple):
    """A decoded `bypassed` record: the window its key names, and its value (None: a tombstone)."""

    stream_id: str
    start_ms: int
    record: BypassRecord | None


def decode_bypassed(key: bytes | None, raw: bytes | None) -> Bypassed:
    """A `bypassed` record (a tombstone has no value), or InvalidInput naming the field.

    The key must be `{stream_id}/{start_ms}`, of the value's stream and window when there is one.
    """
    if key is None:
        raise InvalidInput("key", "is required")
    try:
        text = key.decode()
    except UnicodeDecodeError:
        raise InvalidInput("key", "is not UTF-8") from None
    stream_id, _, start = text.rpartition("/")
    if not stream_id or not start.isdigit():
        raise InvalidInput("key", "must be {stream_id}/{start_ms}")
    if raw is None:
        return Bypassed(stream_id, int(start), None)
    try:
        msg = BypassedMessage.model_validate_json(raw)
    except ValidationError as exc:
        raise _reason(exc) from None
    if text != bypass_key(msg.stream_id, msg.start_ms):
        raise InvalidInput("key", "must be the value's {stream_id}/{start_ms}")
    error = msg.last_error
    record = BypassRecord(
        msg.stream_id,
        msg.start_ms,
        msg.end_ms,
        msg.attempts,
        msg.first_failed_ms,
        msg.bypassed_ms,
        None if error is None else ErrorInfo(error.kind, error.message),
    )
    return Bypassed(msg.stream_id, msg.start_ms, record)


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
    msg = _validated(ViewMessage.model_validate_json, raw)
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
    )
    return Viewed(stream_id, view)


def health_key(partition: int) -> bytes:
    """The (compacted) `health` key of a partition's entry: its number in decimal, as UTF-8."""
    return str(partition).encode()


def encode_health(entry: HealthMessage) -> bytes:
    """The `health` value of a partition's entry; `decode_health` inverts it."""
    return orjson.dumps(entry.model_dump())


def decode_health(key: bytes | None, raw: bytes | None) -> HealthMessage | None:
    """A `health` record: its entry, or None for a tombstone; InvalidInput naming the field."""
    if raw is None:
        return None
    entry = _validated(HealthMessage.model_validate_json, raw)
    if key != health_key(entry.partition):
        raise InvalidInput("key", f"must be the partition {entry.partition} in decimal")
    if any(c.failing > c.total for c in entry.sources.values()):
        raise InvalidInput("sources", "failing must not exceed total")
    return entry


def decode_rejected(raw: bytes | None) -> RejectedMessage:
    """A `rejected` value, or InvalidInput naming the field."""
    return _validated(RejectedMessage.model_validate_json, raw)


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
    "streams": ViewMessage,
    "rejected": RejectedMessage,
    "health": HealthMessage,
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
