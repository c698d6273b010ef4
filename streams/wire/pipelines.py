"""The `pipelines` topic (compacted): one worker's announcement of the pipeline it serves."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from pydantic import Field

from streams.errors import InvalidInput
from streams.wire.base import Ms, Pipeline, Wire, validated

Name = Annotated[str, Field(min_length=1, max_length=400)]


class PipelineMessage(Wire):
    """A live worker's announcement, republished every `interval_ms` (its liveness: see
    streams.registry), and a tombstone under the same key when it stops cleanly."""

    route: Pipeline = Field(description="the pipeline it serves (streams create --pipeline)")
    handler: Name = Field(description="the handler it runs (worker --pipeline)")
    version: Annotated[str, Field(max_length=200)]
    params_schema: dict[str, Any] | None = Field(
        default=None, description="the JSON Schema of the task params; None: not declared"
    )
    worker: Name = Field(description="the worker process's identity")
    group: Name = Field(description="its consumer group on the pipeline's tasks topic")
    published_ms: Ms
    interval_ms: Annotated[int, Field(ge=1, le=3_600_000)]


def pipeline_key(route: str, worker: str) -> bytes:
    """The (compacted) key of one worker's entry: ``{route}/{worker}`` as UTF-8."""
    return f"{route}/{worker}".encode()


def encode_pipeline(entry: PipelineMessage) -> bytes:
    """The `pipelines` value of an entry; `decode_pipeline` inverts it."""
    return orjson.dumps(entry.model_dump())


def decode_pipeline(key: bytes | None, raw: bytes | None) -> PipelineMessage | None:
    """A `pipelines` record: its entry, or None for a tombstone; InvalidInput naming the field."""
    if raw is None:
        return None
    entry = validated(PipelineMessage.model_validate_json, raw)
    if key != pipeline_key(entry.route, entry.worker):
        raise InvalidInput("key", "must be the entry's route/worker")
    return entry
