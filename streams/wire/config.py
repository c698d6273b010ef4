"""A stream's config as it travels: in an upsert on `control`, and in a view on `streams`.

Its defaults and bounds are not written here: each field reads them from the core
(`config_defaults()`, `CONFIG_BOUNDS`, `RETRY_BOUNDS`; streams/core/config.py and retry.py), so
that what the wire accepts and what the core accepts cannot drift apart.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from streams.core._checks import MAX_ERROR_KIND_CHARS
from streams.core.config import (
    CONFIG_BOUNDS,
    MAX_NON_RETRYABLE,
    MAX_PARAMS_BYTES,
    MAX_PARAMS_DEPTH,
    MAX_SOURCE_CHARS,
    config_defaults,
)
from streams.core.retry import DEFAULT_JITTER, RETRY_BOUNDS, RETRY_FACTOR_BOUNDS
from streams.wire.base import PIPELINE_ABSENT, Pipeline, StreamId, Wire

_DURATION = "milliseconds, <= 10 years"
_TIME = "epoch milliseconds (UTC), at most year 9999"
_DEFAULTS = config_defaults()


def _config(name: str, description: str | None = None) -> Any:
    """The constraints of the config's integer field `name`, as the core bounds it."""
    bound = CONFIG_BOUNDS[name]
    return Field(description=description, ge=bound.ge, gt=bound.gt, le=bound.le)


def _retry(name: str) -> Any:
    """The constraints of the retry field `name`, as the core bounds it."""
    if name in RETRY_BOUNDS:
        bound = RETRY_BOUNDS[name]
        return Field(description=_DURATION, ge=bound.ge, gt=bound.gt, le=bound.le)
    factor = RETRY_FACTOR_BOUNDS[name]
    return Field(ge=factor.ge, gt=factor.gt, le=factor.le)


class ImmediateRetry(Wire):
    strategy: Literal["immediate"]


class FixedRetry(Wire):
    strategy: Literal["fixed"]
    interval_ms: Annotated[int, _retry("interval_ms")]


class ExponentialRetry(Wire):
    strategy: Literal["exponential"]
    initial_ms: Annotated[int, _retry("initial_ms")]
    multiplier: Annotated[float, _retry("multiplier")]
    max_ms: Annotated[int, _retry("max_ms")]
    jitter: Annotated[float, _retry("jitter")] = DEFAULT_JITTER


RetryModel = Annotated[
    ImmediateRetry | FixedRetry | ExponentialRetry, Field(discriminator="strategy")
]


class ConfigModel(Wire):
    """A stream's config (streams.core.config): an upsert's fields, and a view's `config`."""

    stream_id: StreamId
    start_ms: Annotated[int, _config("start_ms", _TIME)]
    window_ms: Annotated[int, _config("window_ms", _DURATION)] = _DEFAULTS["window_ms"]
    step_ms: Annotated[int, _config("step_ms", _DURATION)] = _DEFAULTS["step_ms"]
    delay_ms: Annotated[int, _config("delay_ms")] = _DEFAULTS["delay_ms"]
    task_timeout_ms: Annotated[int, _config("task_timeout_ms", _DURATION)] = _DEFAULTS[
        "task_timeout_ms"
    ]
    bypass_after_ms: Annotated[int, _config("bypass_after_ms", _DURATION)] = _DEFAULTS[
        "bypass_after_ms"
    ]
    retry: RetryModel = TypeAdapter(RetryModel).validate_python(_DEFAULTS["retry"])
    max_attempts: Annotated[int, _config("max_attempts")] | None = _DEFAULTS["max_attempts"]
    non_retryable: Annotated[
        list[Annotated[str, Field(max_length=MAX_ERROR_KIND_CHARS)]],
        Field(max_length=MAX_NON_RETRYABLE),
    ] = _DEFAULTS["non_retryable"]
    max_in_flight: Annotated[int, _config("max_in_flight")] = _DEFAULTS["max_in_flight"]
    source: Annotated[str, Field(min_length=1, max_length=MAX_SOURCE_CHARS)] | None = Field(
        default=_DEFAULTS["source"],
        description=(
            "what the stream reads from (e.g. its query endpoint): the outage guard holds the "
            "bypasses of a source's streams while most of them fail together"
        ),
    )
    pipeline: Pipeline = Field(
        default=_DEFAULTS["pipeline"],
        description=(
            "which workers run the stream's tasks: only that pipeline's, which read its tasks "
            "topic ({prefix}.tasks.{pipeline}; {prefix}.tasks for the default one); "
            + PIPELINE_ABSENT
        ),
    )
    params: dict[str, Any] = Field(
        default=_DEFAULTS["params"],
        description=(
            f"handed to the workers: integers within ±(2**53 - 1), nesting at most "
            f"{MAX_PARAMS_DEPTH} deep, at most {MAX_PARAMS_BYTES} bytes as compact JSON"
        ),
    )
    end_ms: Annotated[int, _config("end_ms", _TIME)] | None = Field(
        default=_DEFAULTS["end_ms"],
        description=(
            "a bounded stream: no window goes past it (a multiple of step_ms, after start_ms); "
            "once downstream_ms reaches it the stream is finished"
        ),
    )
    gc_grace_ms: Annotated[int, _config("gc_grace_ms")] = Field(
        default=_DEFAULTS["gc_grace_ms"],
        description="how long a finished or deleted stream's state is kept, then collected",
    )
    bypass_retention_ms: Annotated[int, _config("bypass_retention_ms")] = Field(
        default=_DEFAULTS["bypass_retention_ms"],
        description="how long a bypassed window stays listed (replayable), then tombstoned",
    )
