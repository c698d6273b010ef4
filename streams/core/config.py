"""A stream's configuration: one validated, frozen object, and its JSON wire dict.

Every rule of issue 3, rule 10, is checked in `StreamConfig.__post_init__`, so that no invalid
config can exist; a broken field raises `InvalidInput(field, reason)`. The defaults (the
dataclass's fields, as `config_defaults()`) and the bounds (`CONFIG_BOUNDS`, the MAX_* lengths)
are written here only: the wire's models (streams.wire.config) are built from them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from streams.core._checks import (
    MAX_DURATION_MS,
    MAX_ERROR_KIND_CHARS,
    MAX_SAFE_INT,
    MAX_TIME_MS,
    Bound,
    check_int,
    check_str,
)
from streams.core.retry import Exponential, Fixed, Immediate, RetryPolicy
from streams.errors import InvalidInput

MAX_STREAM_ID_CHARS = 200
# A source names what a stream reads from (e.g. a query endpoint); the outage guard counts the
# streams that share one (streams.core.outage).
MAX_SOURCE_CHARS = 200
# The pipeline a stream belongs to: its tasks go to that pipeline's topic (streams.topics), and
# only that pipeline's workers read them and may answer. A stream that names none (every stream
# stored before pipelines existed) belongs to `default`, whose topic is the one every worker read
# before (`{prefix}.tasks`). A name becomes part of a topic name, so it is kept to what Kafka
# allows there without '.': Kafka warns that '.' and '_' collide in its metric names.
DEFAULT_PIPELINE = "default"
MAX_PIPELINE_CHARS = 64
PIPELINE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
_PIPELINE = re.compile(PIPELINE_PATTERN)
# Each window in flight is state and a task; a catch-up needs tens, not millions.
MAX_IN_FLIGHT = 1000
# non_retryable is kept in the state: a few dozen kinds, each no longer than a nack's kind can be
# (a longer one could never match, since error.kind is cut to MAX_ERROR_KIND_CHARS).
MAX_NON_RETRYABLE = 100
# Params travel in every task and sit in the stream's state: their compact JSON (UTF-8) is kept
# far below Kafka's default 1 MiB message size, and their nesting far below orjson's limit (254).
MAX_PARAMS_BYTES = 65_536
MAX_PARAMS_DEPTH = 64
DEFAULT_RETRY = Fixed(60_000)
# How long a finished or deleted stream's state is kept (it answers late results with a reason
# until then), as the seed's scavenger does: 48 hours.
DEFAULT_GC_GRACE_MS = 48 * 3_600_000
# How long a bypassed window stays listed (replayable) on `bypassed`: 30 days.
DEFAULT_BYPASS_RETENTION_MS = 30 * 86_400_000
_EMPTY: Mapping[str, Any] = MappingProxyType({})

# The bounds of every integer field, by name. A time is bounded by MAX_TIME_MS and a duration by
# MAX_DURATION_MS, so that every time the core computes from them stays within MAX_MS.
_TIME = Bound(ge=0, le=MAX_TIME_MS)
_DURATION = Bound(gt=0, le=MAX_DURATION_MS)
CONFIG_BOUNDS: Mapping[str, Bound[int]] = MappingProxyType(
    {
        "start_ms": _TIME,
        "window_ms": _DURATION,
        "step_ms": _DURATION,
        "delay_ms": Bound(ge=0, le=MAX_DURATION_MS),
        "task_timeout_ms": _DURATION,
        "bypass_after_ms": _DURATION,
        "max_attempts": Bound(ge=1, le=MAX_SAFE_INT),
        "max_in_flight": Bound(ge=1, le=MAX_IN_FLIGHT),
        "end_ms": _TIME,
        "gc_grace_ms": _DURATION,
        "bypass_retention_ms": _DURATION,
    }
)


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """How one stream cuts its timeline into windows and retries them (see the issue's table).

    `params` is stored as a read-only copy; `non_retryable` may be given as any collection of str.
    """

    stream_id: str
    start_ms: int
    window_ms: int = 60_000
    step_ms: int = 15_000
    delay_ms: int = 0
    task_timeout_ms: int = 60_000
    bypass_after_ms: int = 300_000
    retry: RetryPolicy = DEFAULT_RETRY
    max_attempts: int | None = None
    non_retryable: frozenset[str] = frozenset()
    max_in_flight: int = 1
    params: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, hash=False)
    end_ms: int | None = None
    gc_grace_ms: int = DEFAULT_GC_GRACE_MS
    bypass_retention_ms: int = DEFAULT_BYPASS_RETENTION_MS
    source: str | None = None  # what the stream reads from; None shares no source
    pipeline: str = DEFAULT_PIPELINE  # which workers run its tasks (see DEFAULT_PIPELINE)

    def __post_init__(self) -> None:
        stream_id = check_str("stream_id", self.stream_id)
        if not stream_id:
            raise InvalidInput("stream_id", "must not be empty")
        if len(stream_id) > MAX_STREAM_ID_CHARS:
            raise InvalidInput("stream_id", f"must be at most {MAX_STREAM_ID_CHARS} characters")
        # Bounded so that every time the core computes stays within what the codec reads back
        # (see MAX_DURATION_MS).
        _check("start_ms", self.start_ms)
        step_ms = _check("step_ms", self.step_ms)
        window_ms = _check("window_ms", self.window_ms)
        if window_ms % step_ms:
            raise InvalidInput("window_ms", f"must be a multiple of step_ms ({step_ms})")
        _check("delay_ms", self.delay_ms)
        _check("task_timeout_ms", self.task_timeout_ms)
        _check("bypass_after_ms", self.bypass_after_ms)
        if not isinstance(self.retry, Immediate | Fixed | Exponential):
            raise InvalidInput("retry", "must be Immediate, Fixed or Exponential")
        if self.max_attempts is not None:
            _check("max_attempts", self.max_attempts)
        _check("max_in_flight", self.max_in_flight)
        if self.end_ms is not None:
            _check("end_ms", self.end_ms)
            if self.end_ms <= self.start_ms:
                raise InvalidInput("end_ms", f"must be after start_ms ({self.start_ms})")
            if self.end_ms % step_ms:
                raise InvalidInput("end_ms", f"must be a multiple of step_ms ({step_ms})")
        _check("gc_grace_ms", self.gc_grace_ms)
        _check("bypass_retention_ms", self.bypass_retention_ms)
        if self.source is not None:
            source = check_str("source", self.source)
            if not source or len(source) > MAX_SOURCE_CHARS:
                raise InvalidInput("source", f"must be 1 to {MAX_SOURCE_CHARS} characters")
        check_pipeline(self.pipeline)
        object.__setattr__(self, "non_retryable", _kinds(self.non_retryable))
        object.__setattr__(self, "params", _params(self.params))


def _check(name: str, value: Any) -> int:
    low, high = _LIMITS[name]
    return check_int(name, value, low, high)


# CONFIG_BOUNDS as check_int's (minimum, maximum): read at every state load, so looked up once.
_LIMITS = {
    name: (bound.ge if bound.gt is None else bound.gt + 1, bound.le)
    for name, bound in CONFIG_BOUNDS.items()
}


def check_pipeline(value: Any) -> str:
    """Return `value` if it can name a pipeline (and so its tasks topic), else raise
    InvalidInput naming `pipeline` and why."""
    pipeline = check_str("pipeline", value)
    if pipeline is DEFAULT_PIPELINE:  # the usual case, at every state load
        return pipeline
    if not 0 < len(pipeline) <= MAX_PIPELINE_CHARS:
        raise InvalidInput("pipeline", f"must be 1 to {MAX_PIPELINE_CHARS} characters")
    if not _PIPELINE.fullmatch(pipeline):
        raise InvalidInput(
            "pipeline",
            "must be letters, digits, '_' or '-', starting with a letter or digit "
            "(it names the pipeline's tasks topic)",
        )
    return pipeline


def config_defaults() -> dict[str, Any]:
    """The wire dict of every field but stream_id and start_ms, as the dataclass defaults it.

    A new dict for each call (it holds a list and dicts); the wire reads it once, at import.
    """
    defaults = config_to_dict(StreamConfig(stream_id="-", start_ms=0))
    del defaults["stream_id"], defaults["start_ms"]
    return {**defaults, "source": None, "pipeline": DEFAULT_PIPELINE}


def _kinds(value: Any) -> frozenset[str]:
    if isinstance(value, str | bytes | Mapping) or not hasattr(value, "__iter__"):
        raise InvalidInput("non_retryable", "must be a collection of error kinds")
    kinds = frozenset(value)
    if len(kinds) > MAX_NON_RETRYABLE:
        raise InvalidInput("non_retryable", f"must hold at most {MAX_NON_RETRYABLE} kinds")
    for kind in kinds:
        if len(check_str("non_retryable", kind)) > MAX_ERROR_KIND_CHARS:
            raise InvalidInput(
                "non_retryable", f"each kind must be at most {MAX_ERROR_KIND_CHARS} characters"
            )
    return kinds


def _params(value: Any) -> Mapping[str, Any]:
    if value is _EMPTY:
        return value
    if not isinstance(value, Mapping):
        raise InvalidInput("params", f"must be an object, got {type(value).__name__}")
    for key in value:
        check_str("params", key)
    return MappingProxyType(dict(value))


def check_params(params: Mapping[str, Any]) -> None:
    """Raise InvalidInput unless every task and state can carry `params` (checked at upsert).

    Integers within ±MAX_SAFE_INT, finite floats, nesting at most MAX_PARAMS_DEPTH deep and a
    compact JSON encoding of at most MAX_PARAMS_BYTES. Not part of StreamConfig's own checks,
    which run at every state load: the wire decoder calls it once, when a config comes in.
    """
    _check_json("params", params, 1)
    try:
        size = len(json.dumps(params, ensure_ascii=False, separators=(",", ":")).encode())
    except UnicodeEncodeError:
        raise InvalidInput("params", "must be valid UTF-8 (a lone surrogate is not)") from None
    if size > MAX_PARAMS_BYTES:
        raise InvalidInput(
            "params", f"must encode to at most {MAX_PARAMS_BYTES} bytes of JSON, got {size}"
        )


def _check_json(path: str, value: Any, depth: int) -> None:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        if not -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            raise InvalidInput(path, "must be an integer within ±(2**53 - 1)")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(path, "must be plain JSON: NaN and Infinity are not allowed")
        return
    if depth > MAX_PARAMS_DEPTH:
        raise InvalidInput(path, f"must nest at most {MAX_PARAMS_DEPTH} levels deep")
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_json(f"{path}.{check_str(path, key)}", item, depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_json(f"{path}.{index}", item, depth + 1)
    else:
        raise InvalidInput(path, f"must be plain JSON, got {type(value).__name__}")


_PLAIN_FIELDS = (
    "stream_id",
    "start_ms",
    "window_ms",
    "step_ms",
    "delay_ms",
    "task_timeout_ms",
    "bypass_after_ms",
    "max_attempts",
    "max_in_flight",
    "end_ms",
    "gc_grace_ms",
    "bypass_retention_ms",
    "source",
    "pipeline",
)


def config_from_dict(d: Mapping[str, Any]) -> StreamConfig:
    """Build a config from its wire dict; absent fields take defaults, unknown keys are ignored."""
    if not isinstance(d, Mapping):
        raise InvalidInput("config", f"must be an object, got {type(d).__name__}")
    for required in ("stream_id", "start_ms"):
        if required not in d:
            raise InvalidInput(required, "is required")
    kwargs: dict[str, Any] = {name: d[name] for name in _PLAIN_FIELDS if name in d}
    if "retry" in d:
        kwargs["retry"] = retry_from_dict(d["retry"])
    if "non_retryable" in d:
        kinds = d["non_retryable"]
        if not isinstance(kinds, list | tuple | set | frozenset):
            raise InvalidInput("non_retryable", "must be a list of error kinds")
        kwargs["non_retryable"] = kinds
    if "params" in d:
        kwargs["params"] = d["params"]
    return StreamConfig(**kwargs)


def config_to_dict(config: StreamConfig) -> dict[str, Any]:
    """The JSON-compatible wire dict of `config`; `config_from_dict` inverts it.

    `source` is present only when set, and `pipeline` only when not the default, so that a
    config without them encodes (and so hashes into its incarnation) exactly as before they
    existed.
    """
    d: dict[str, Any] = {
        "stream_id": config.stream_id,
        "start_ms": config.start_ms,
        "window_ms": config.window_ms,
        "step_ms": config.step_ms,
        "delay_ms": config.delay_ms,
        "task_timeout_ms": config.task_timeout_ms,
        "bypass_after_ms": config.bypass_after_ms,
        "retry": retry_to_dict(config.retry),
        "max_attempts": config.max_attempts,
        "non_retryable": sorted(config.non_retryable),
        "max_in_flight": config.max_in_flight,
        "params": dict(config.params),
        "end_ms": config.end_ms,
        "gc_grace_ms": config.gc_grace_ms,
        "bypass_retention_ms": config.bypass_retention_ms,
    }
    if config.source is not None:
        d["source"] = config.source
    if config.pipeline != DEFAULT_PIPELINE:
        d["pipeline"] = config.pipeline
    return d


def retry_from_dict(d: Any) -> RetryPolicy:
    """Build a retry policy from `{"strategy": ..., ...}`; fields are named `retry.<field>`."""
    if not isinstance(d, Mapping):
        raise InvalidInput("retry", f"must be an object, got {type(d).__name__}")
    strategy = d.get("strategy")
    if strategy == "immediate":
        return Immediate()
    if strategy == "fixed":
        return Fixed(**_pick(d, ("interval_ms",)))
    if strategy == "exponential":
        return Exponential(**_pick(d, ("initial_ms", "multiplier", "max_ms", "jitter")))
    raise InvalidInput("retry.strategy", "must be one of immediate, fixed, exponential")


def _pick(d: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {name: d[name] for name in names if name in d}


def retry_to_dict(policy: RetryPolicy) -> dict[str, Any]:
    """The wire dict of a retry policy."""
    if isinstance(policy, Immediate):
        return {"strategy": "immediate"}
    if isinstance(policy, Fixed):
        return {"strategy": "fixed", "interval_ms": policy.interval_ms}
    return {
        "strategy": "exponential",
        "initial_ms": policy.initial_ms,
        "multiplier": policy.multiplier,
        "max_ms": policy.max_ms,
        "jitter": policy.jitter,
    }
