"""What every topic's codec shares: the strict base model, the bounded field types, the error
model, the key of the per-stream topics, and the translation of a validation error into
InvalidInput naming the field."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from streams.core._checks import (
    MAX_DURATION_MS,
    MAX_ERROR_KIND_CHARS,
    MAX_ERROR_MESSAGE_CHARS,
    MAX_MS,
    MAX_SAFE_INT,
    MAX_TIME_MS,
)
from streams.core.config import (
    DEFAULT_PIPELINE,
    MAX_PIPELINE_CHARS,
    MAX_STREAM_ID_CHARS,
    PIPELINE_PATTERN,
)
from streams.errors import InvalidInput

Ms = Annotated[int, Field(ge=0, le=MAX_MS, description="epoch milliseconds (UTC)")]
# A config's times and durations are bounded further, so that every time the core computes from
# them stays within MAX_MS (streams/core/_checks.py says why).
StartMs = Annotated[
    int, Field(ge=0, le=MAX_TIME_MS, description="epoch milliseconds (UTC), at most year 9999")
]
Duration = Annotated[int, Field(gt=0, le=MAX_DURATION_MS, description="milliseconds, <= 10 years")]
Count = Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]
StreamId = Annotated[str, Field(min_length=1, max_length=MAX_STREAM_ID_CHARS)]
# A pipeline's name, as the core bounds it (streams.core.config.check_pipeline).
Pipeline = Annotated[
    str, Field(min_length=1, max_length=MAX_PIPELINE_CHARS, pattern=PIPELINE_PATTERN)
]
PIPELINE_ABSENT = f"absent: {DEFAULT_PIPELINE!r}, the pipeline of every stream made before them"
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


class Wire(BaseModel):
    # strict: "60" is not 60 and true is not 1; extra fields are allowed and ignored.
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class ErrorModel(Wire):
    # Cut at decode rather than refused: a worker's failure still counts.
    kind: str = Field(min_length=1, description=f"cut to {MAX_ERROR_KIND_CHARS} characters")
    message: str = Field(default="", description=f"cut to {MAX_ERROR_MESSAGE_CHARS} characters")


def stream_key(stream_id: str) -> bytes:
    """The key of `control`, `tasks`, `results` and `commits`: the stream id as UTF-8.

    Produced with the murmur2 partitioner, it puts a stream's records in its state's partition.
    """
    return stream_id.encode()


_TAGS = {
    "type": "upsert, pause, resume, delete, replay, source_set, source_delete",
    "outcome": "ack, nack, heartbeat",
    "strategy": "immediate, fixed, exponential",
}

# The union tags of the models, and pydantic's name of a plain-object check: dropped from an
# error's location (see `reason`).
VARIANTS = frozenset(
    {
        "upsert",
        "pause",
        "resume",
        "delete",
        "replay",
        "source_set",
        "source_delete",
        "ack",
        "nack",
        "heartbeat",
        "immediate",
        "fixed",
        "exponential",
        "function-after[_ensure_object()]",
    }
)

_Model = TypeVar("_Model")


def validated(
    validate: Callable[[bytes], _Model], raw: bytes | None, tags: Collection[str] = frozenset()
) -> _Model:
    """`validate(raw)`, with an absent value and the first validation error as InvalidInput."""
    if raw is None:
        raise InvalidInput("value", "is empty")
    try:
        return validate(raw)
    except ValidationError as exc:
        raise reason(exc, tags) from None


def reason(exc: ValidationError, tags: Collection[str] = frozenset()) -> InvalidInput:
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
