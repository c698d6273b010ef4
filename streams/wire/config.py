"""A stream's config as it travels: in an upsert on `control`, and in a view on `streams`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from streams.core._checks import MAX_DURATION_MS, MAX_ERROR_KIND_CHARS
from streams.core.config import (
    DEFAULT_BYPASS_RETENTION_MS,
    DEFAULT_GC_GRACE_MS,
    MAX_IN_FLIGHT,
    MAX_NON_RETRYABLE,
    MAX_PARAMS_BYTES,
    MAX_PARAMS_DEPTH,
    MAX_SOURCE_CHARS,
)
from streams.wire.base import Count, Duration, StartMs, StreamId, Wire


class ImmediateRetry(Wire):
    strategy: Literal["immediate"]


class FixedRetry(Wire):
    strategy: Literal["fixed"]
    interval_ms: Duration


class ExponentialRetry(Wire):
    strategy: Literal["exponential"]
    initial_ms: Duration
    multiplier: float = Field(ge=1)
    max_ms: Duration
    jitter: float = Field(default=0.0, ge=0, le=1)


RetryModel = Annotated[
    ImmediateRetry | FixedRetry | ExponentialRetry, Field(discriminator="strategy")
]


class ConfigModel(Wire):
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
    ] = []  # noqa: RUF012 (a pydantic default, copied for each instance)
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
