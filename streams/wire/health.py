"""The `health` topic (compacted): per source, one partition's failing and total streams."""

from __future__ import annotations

from typing import Annotated

import orjson
from pydantic import Field

from streams.core._checks import MAX_SAFE_INT
from streams.errors import InvalidInput
from streams.wire.base import Ms, Wire, validated


class SourceCountsModel(Wire):
    failing: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]
    total: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]
    outage_since_ms: Ms | None = Field(
        default=None, description="since when the publisher has seen the source in outage"
    )
    demand: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)] = Field(
        default=0,
        description="windows of the source in flight or waiting for admission in the partition "
        "(each coordinator's share of a capped source is allocated by it)",
    )
    in_flight: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)] = Field(
        default=0, description="of the demand, the tasks dispatched and not yet answered"
    )
    waiting: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)] = Field(
        default=0,
        description="of the demand, the windows waiting for admission (and live streams of a "
        "limited source standing by for their next window)",
    )
    dispatched: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)] = Field(
        default=0,
        description="tasks of the source dispatched in the partition since its owner took it "
        "(a counter: it starts again at 0 when the partition moves or its owner restarts)",
    )


class HealthMessage(Wire):
    """Per source, the failing and total streams of one partition, as its owner published them."""

    partition: Annotated[int, Field(ge=0)]
    owner: str = Field(max_length=400, description="the coordinator instance that owns it")
    published_ms: Ms
    sources: dict[Annotated[str, Field(min_length=1, max_length=200)], SourceCountsModel]
    pacing: dict[
        Annotated[str, Field(min_length=1, max_length=200)], Annotated[int, Field(ge=0)]
    ] = Field(
        default_factory=dict,
        description="the sources whose recovery the owner paces now, and the concurrency "
        "it allows each (streams.core.admission.pacing)",
    )


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
    entry = validated(HealthMessage.model_validate_json, raw)
    if key != health_key(entry.partition):
        raise InvalidInput("key", f"must be the partition {entry.partition} in decimal")
    if any(c.failing > c.total for c in entry.sources.values()):
        raise InvalidInput("sources", "failing must not exceed total")
    return entry
