"""The wire contract: pydantic models of every topic's JSON value, and its one codec.

Every reader and writer of a topic goes through the functions here, both directions. Each topic
has a module of its own, named for it (`streams.wire.control`, ...; the `streams` topic's is
`streams.wire.views`):

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
| pipelines| `pipeline_key(route, worker)`    | `encode_pipeline` | `decode_pipeline(key, raw)` |
| sources  | `source_view_key(source)`        | `encode_source_view` | `decode_source_view(k, raw)`|

A source's controls (`source_set`, `source_delete`) go on `control` too, keyed by
`source_control_key(source)`, which no stream's key can be (`streams.wire.sources`).

`base` holds what they share (bounded field types, `stream_key`, errors as InvalidInput) and
`config` a stream's config as upserts and views carry it (its defaults and bounds read from
streams.core.config). A decoder raises InvalidInput naming the field; the coordinator sends an
invalid input to `rejected`, the read model ignores it. The core's value types are what the codec
reads into and writes from (their `to_wire` renders the output dicts; tasks and commits, msgspec
Structs, are encoded straight from their fields in the same shape). `python -m streams.wire`
writes `schemas/*.schema.json` from these models (`schemas`).

Every name importers use is re-exported here, so `from streams.wire import X` is the one way in.
"""

from streams.core.config import MAX_STREAM_ID_CHARS
from streams.wire.base import (
    Count,
    Duration,
    ErrorModel,
    Incarnation,
    Ms,
    StartMs,
    StreamId,
    stream_key,
)
from streams.wire.bypassed import (
    Bypassed,
    BypassedMessage,
    bypassed_key,
    decode_bypassed,
    encode_bypassed,
)
from streams.wire.commits import CommitMessage, CommittedWindowModel, decode_commit, encode_commit
from streams.wire.config import (
    ConfigModel,
    ExponentialRetry,
    FixedRetry,
    ImmediateRetry,
    RetryModel,
)
from streams.wire.control import (
    ControlModel,
    ReplayControl,
    StreamControl,
    UpsertControl,
    decode_control,
    encode_control,
)
from streams.wire.health import (
    HealthMessage,
    SourceCountsModel,
    decode_health,
    encode_health,
    health_key,
)
from streams.wire.pipelines import (
    PipelineMessage,
    decode_pipeline,
    encode_pipeline,
    pipeline_key,
)
from streams.wire.rejected import MAX_RAW_BYTES, RejectedMessage, decode_rejected, rejected_value
from streams.wire.results import (
    AckResult,
    HeartbeatResult,
    NackResult,
    ResultModel,
    _plain_result,
    _validated_result,
    decode_result,
    encode_result,
)
from streams.wire.schemas import SCHEMAS, json_schema, write_schemas
from streams.wire.sources import (
    SOURCE_CONTROL_PREFIX,
    SourceDeleteControl,
    SourceEntry,
    SourceSetControl,
    SourceViewMessage,
    decode_source_entry,
    decode_source_view,
    encode_source_view,
    source_control_key,
    source_view_key,
)
from streams.wire.tasks import TaskMessage, decode_task, encode_task
from streams.wire.views import Viewed, ViewMessage, WindowModel, decode_view, encode_view

__all__ = [
    "MAX_RAW_BYTES",
    "MAX_STREAM_ID_CHARS",
    "SCHEMAS",
    "SOURCE_CONTROL_PREFIX",
    "AckResult",
    "Bypassed",
    "BypassedMessage",
    "CommitMessage",
    "CommittedWindowModel",
    "ConfigModel",
    "ControlModel",
    "Count",
    "Duration",
    "ErrorModel",
    "ExponentialRetry",
    "FixedRetry",
    "HealthMessage",
    "HeartbeatResult",
    "ImmediateRetry",
    "Incarnation",
    "Ms",
    "NackResult",
    "PipelineMessage",
    "RejectedMessage",
    "ReplayControl",
    "ResultModel",
    "RetryModel",
    "SourceCountsModel",
    "SourceDeleteControl",
    "SourceEntry",
    "SourceSetControl",
    "SourceViewMessage",
    "StartMs",
    "StreamControl",
    "StreamId",
    "TaskMessage",
    "UpsertControl",
    "ViewMessage",
    "Viewed",
    "WindowModel",
    "_plain_result",
    "_validated_result",
    "bypassed_key",
    "decode_bypassed",
    "decode_commit",
    "decode_control",
    "decode_health",
    "decode_pipeline",
    "decode_rejected",
    "decode_result",
    "decode_source_entry",
    "decode_source_view",
    "decode_task",
    "decode_view",
    "encode_bypassed",
    "encode_commit",
    "encode_control",
    "encode_health",
    "encode_pipeline",
    "encode_result",
    "encode_source_view",
    "encode_task",
    "encode_view",
    "health_key",
    "json_schema",
    "pipeline_key",
    "rejected_value",
    "source_control_key",
    "source_view_key",
    "stream_key",
    "write_schemas",
]
