"""A source's limits on the wire: the `source_set` and `source_delete` controls on `control`, and
the compacted `sources` view (one partition, key the source's name as UTF-8).

    control  {"type": "source_set", "source", "max_in_flight", "rate_per_s", "burst",
              "backfill_share", "pace_start"}       (a field left out takes its default)
             {"type": "source_delete", "source"}
    sources  {"source", "max_in_flight", "rate_per_s", "burst", "backfill_share", "pace_start",
              "updated_ms"}                          (every field; a tombstone once deleted)

The models here check types only: the bounds are `SourceLimits`'s (streams.core.admission.
limits), applied to every decoded value, so a bad one raises InvalidInput naming its field.

**The control key.** A source's controls are keyed on `control` by `source_control_key(name)`:
0xFF, then "source:" and the name as UTF-8. A stream's key is its id as UTF-8, in which 0xFF
never occurs, so no stream's key is ever a source's. A producer partitions it with murmur2 like
any key of `control`, so that one source's controls stay in order in one partition (the
coordinator checks it, as for a stream's).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NamedTuple

import orjson
from pydantic import Field

from streams.core.admission import (
    DEFAULT_BACKFILL_SHARE,
    DEFAULT_PACE_START,
    SourceDelete,
    SourceLimits,
    SourceSet,
    limits_from_dict,
    limits_to_dict,
)
from streams.core.admission.limits import FIELDS, MAX_RATE_PER_S, MAX_SOURCE_IN_FLIGHT
from streams.core.config import MAX_SOURCE_CHARS
from streams.errors import InvalidInput
from streams.wire.base import Ms, Wire, validated

SOURCE_CONTROL_PREFIX = b"\xffsource:"

SourceName = Annotated[str, Field(min_length=1, max_length=MAX_SOURCE_CHARS)]


class LimitsFields(Wire):
    """A source's limits (bounds: streams/core/admission/limits.py, checked after decoding)."""

    source: SourceName = Field(description="the source, as streams name it in their config")
    max_in_flight: int | None = Field(
        default=None,
        description=f"tasks in flight across coordinators, 1 to {MAX_SOURCE_IN_FLIGHT:,}; "
        "null: no cap",
    )
    rate_per_s: float | None = Field(
        default=None,
        description=f"dispatches per second, above 0 and at most {MAX_RATE_PER_S:,.0f}; "
        "null: no rate limit",
    )
    burst: int | None = Field(
        default=None,
        description="the token bucket's size, at least 1, only with a rate; null: "
        "max(1, ceil(rate_per_s))",
    )
    backfill_share: float = Field(
        default=DEFAULT_BACKFILL_SHARE,
        description="the part of the cap catching-up and replayed windows keep, 0 <= x < 1",
    )
    pace_start: int = Field(
        default=DEFAULT_PACE_START,
        description=f"a paced recovery's starting concurrency, 1 to {MAX_SOURCE_IN_FLIGHT:,}",
    )

    def limits(self) -> SourceLimits:
        """The limits, or InvalidInput naming the field out of its bounds."""
        return limits_from_dict({name: getattr(self, name) for name in FIELDS})


class SourceSetControl(LimitsFields):
    """Set a source's limits (every field: one left out takes its default)."""

    type: Literal["source_set"]


class SourceDeleteControl(Wire):
    """Delete a source's limits: it is unlimited again (deleting an unknown source is fine)."""

    type: Literal["source_delete"]
    source: SourceName


class SourceViewMessage(LimitsFields):
    """A source's limits as the coordinator applied them (compacted, keyed by the source's name;
    a tombstone once deleted). Every field is present, `burst` resolved."""

    updated_ms: Ms = Field(description="when a coordinator applied the source_set")


def source_control_key(source: str) -> bytes:
    """The `control` key of a source's controls (never a stream's key: see the module)."""
    return SOURCE_CONTROL_PREFIX + source.encode()


def source_control(msg: SourceSetControl | SourceDeleteControl) -> SourceSet | SourceDelete:
    """A decoded control as the core's value; InvalidInput naming a field out of its bounds."""
    if isinstance(msg, SourceDeleteControl):
        return SourceDelete(msg.source)
    return SourceSet(msg.limits())


def source_control_dict(control: SourceSet | SourceDelete) -> dict[str, Any]:
    """The `control` value of a source's control, as a dict (streams.wire.control encodes it)."""
    if isinstance(control, SourceDelete):
        return {"type": "source_delete", "source": control.source}
    return {"type": "source_set", **limits_to_dict(control.limits)}


def source_view_key(source: str) -> bytes:
    """The (compacted) `sources` key of a source's entry: its name as UTF-8."""
    return source.encode()


def encode_source_view(limits: SourceLimits, updated_ms: int) -> bytes:
    """The `sources` value of a source's limits; `decode_source_view` inverts it."""
    return orjson.dumps({**limits_to_dict(limits), "updated_ms": updated_ms})


class SourceEntry(NamedTuple):
    """A `sources` entry: the limits, and when a coordinator applied them."""

    limits: SourceLimits
    updated_ms: int


def decode_source_entry(key: bytes | None, raw: bytes | None) -> SourceEntry | None:
    """A `sources` record: its entry, or None for a tombstone; InvalidInput naming the field
    (the key must be the entry's source)."""
    if key is None:
        raise InvalidInput("key", "is required")
    if raw is None:
        return None
    msg = validated(SourceViewMessage.model_validate_json, raw)
    if key != source_view_key(msg.source):
        raise InvalidInput("key", "must be the value's source as UTF-8")
    return SourceEntry(msg.limits(), msg.updated_ms)


def decode_source_view(key: bytes | None, raw: bytes | None) -> SourceLimits | None:
    """A `sources` record: the source's limits, or None for a tombstone; InvalidInput naming
    the field (the key must be the value's source)."""
    entry = decode_source_entry(key, raw)
    return None if entry is None else entry.limits
