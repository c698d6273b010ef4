"""`streams create|update` flags -> a stream config dict, validated like the coordinator does.

Every error names the flag: `--window: '5x' is not a duration`, or, for a rule across fields,
`--window (window_ms): must be a multiple of step_ms (15000)`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streams.core.config import (
    CONFIG_BOUNDS,
    StreamConfig,
    check_params,
    config_from_dict,
    config_to_dict,
)
from streams.errors import InvalidInput
from streams.humanize import format_duration, format_time, parse_duration_ms, parse_time_ms

# Config fields and the flags that set them, for error messages.
FLAGS = {
    "stream_id": "STREAM",
    "start_ms": "--start",
    "window_ms": "--window",
    "step_ms": "--step",
    "delay_ms": "--delay",
    "task_timeout_ms": "--timeout",
    "bypass_after_ms": "--bypass-after",
    "retry": "--retry",
    "max_attempts": "--max-attempts",
    "non_retryable": "--non-retryable",
    "max_in_flight": "--max-in-flight",
    "params": "--param",
    "end_ms": "--end",
    "gc_grace_ms": "--gc-grace",
    "bypass_retention_ms": "--bypass-retention",
    "source": "--source",
    "pipeline": "--pipeline",
}
_TIMES = ("start_ms", "end_ms")
_DEFAULT_STEP_MS = StreamConfig(stream_id="-", start_ms=0).step_ms
_DURATIONS = {
    "window": "window_ms",
    "step": "step_ms",
    "delay": "delay_ms",
    "timeout": "task_timeout_ms",
    "bypass_after": "bypass_after_ms",
    "gc_grace": "gc_grace_ms",
    "bypass_retention": "bypass_retention_ms",
}


@dataclass(frozen=True)
class ConfigFlags:
    """The flags of `streams create` and `streams update` as typed (None = not given)."""

    start: str | None = None
    window: str | None = None
    step: str | None = None
    delay: str | None = None
    timeout: str | None = None
    bypass_after: str | None = None
    retry: str | None = None
    max_attempts: int | None = None
    non_retryable: Sequence[str] | None = None
    max_in_flight: int | None = None
    params: Sequence[str] | None = None
    params_json: str | None = None
    end: str | None = None
    gc_grace: str | None = None
    bypass_retention: str | None = None
    source: str | None = None  # "" clears it
    pipeline: str | None = None

    def changes(self, now_ms: int) -> dict[str, Any]:
        """The config fields these flags set, parsed (params are handled by `merge`)."""
        out: dict[str, Any] = {}
        if self.start is not None:
            out["start_ms"] = parse_time_ms(self.start, now_ms, "--start")
        if self.end is not None:
            out["end_ms"] = parse_time_ms(self.end, now_ms, "--end")
        for name, field in _DURATIONS.items():
            text = getattr(self, name)
            if text is not None:
                out[field] = parse_duration_ms(text, "--" + name.replace("_", "-"))
        if self.retry is not None:
            out["retry"] = parse_retry(self.retry)
        if self.max_attempts is not None:
            out["max_attempts"] = self.max_attempts or None  # 0: no limit
        if self.non_retryable is not None:
            kinds = [k.strip() for text in self.non_retryable for k in text.split(",")]
            out["non_retryable"] = sorted({k for k in kinds if k})
        if self.max_in_flight is not None:
            out["max_in_flight"] = self.max_in_flight
        if self.source is not None:
            out["source"] = self.source or None
        if self.pipeline is not None:
            out["pipeline"] = self.pipeline
        return out

    def merge(self, base: Mapping[str, Any], now_ms: int) -> dict[str, Any]:
        """`base` with these flags applied: --params-json replaces params, --param sets keys."""
        merged = {**base, **self.changes(now_ms)}
        if self.end is not None:
            merged["end_ms"] = _on_step(merged["end_ms"], merged.get("step_ms", _DEFAULT_STEP_MS))
        params = dict(base.get("params") or {})
        if self.params_json is not None:
            params = parse_params_json(self.params_json)
        params.update(parse_params(self.params or ()))
        merged["params"] = params
        return merged


def _on_step(end_ms: int, step_ms: Any) -> int:
    """`--end` down to a multiple of the step, as the coordinator truncates `--start`: both
    take `now+1m` (a bad step is left for `validated` to name)."""
    if isinstance(step_ms, int) and step_ms > 0:
        return end_ms - end_ms % step_ms
    return end_ms


def _out_of_bounds(field: str, value: Any) -> str | None:
    """The core's "must be <= 315360000000" for a time or duration flag, as a person reads it:
    "must be <= 3650d, got 3651d" (None when `value` is within bounds, or not such a field)."""
    if field in _TIMES:
        show: Callable[[int], str] = format_time
    elif field in _DURATIONS.values():
        show = format_duration
    else:
        return None
    if type(value) is not int:
        return None
    bound = CONFIG_BOUNDS[field]
    if bound.le is not None and value > bound.le:
        return f"must be <= {show(bound.le)}, got {show(value)}"
    if bound.gt is not None and value <= bound.gt:
        return f"must be more than {show(bound.gt)}, got {show(value)}"
    if bound.ge is not None and value < bound.ge:
        return f"must be >= {show(bound.ge)}, got {show(value)}"
    return None


def validated(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's full wire dict, or InvalidInput naming the flag and the field."""
    try:
        full = config_to_dict(config_from_dict(config))
        json.dumps(full, allow_nan=False)
        check_params(full["params"])  # what the coordinator checks at upsert, checked here first
    except InvalidInput as exc:
        top = exc.field.split(".")[0]
        flag = FLAGS.get(top)
        reason = _out_of_bounds(top, config.get(top)) or exc.reason
        raise InvalidInput(f"{flag} ({exc.field})" if flag else exc.field, reason) from None
    except ValueError:
        raise InvalidInput("--param", "NaN and Infinity are not JSON") from None
    return full


def parse_retry(text: str) -> dict[str, Any]:
    """`immediate`, `fixed:60s` or `exponential:INITIAL,MULTIPLIER,MAX[,JITTER]`."""
    strategy, _, args = text.strip().partition(":")
    strategy = strategy.lower()
    parts = [p.strip() for p in args.split(",")] if args else []
    if strategy == "immediate" and not parts:
        return {"strategy": "immediate"}
    if strategy == "fixed" and len(parts) == 1:
        return {"strategy": "fixed", "interval_ms": parse_duration_ms(parts[0], "--retry")}
    if strategy == "exponential" and len(parts) in (3, 4):
        return {
            "strategy": "exponential",
            "initial_ms": parse_duration_ms(parts[0], "--retry"),
            "multiplier": _number(parts[1], "multiplier"),
            "max_ms": parse_duration_ms(parts[2], "--retry"),
            "jitter": _number(parts[3], "jitter") if len(parts) == 4 else 0.0,
        }
    raise InvalidInput(
        "--retry",
        f"{text!r} is not a retry policy; use immediate, fixed:60s or "
        "exponential:INITIAL,MULTIPLIER,MAX[,JITTER] like exponential:1s,2,5m,0.1",
    )


def parse_params(pairs: Sequence[str]) -> dict[str, Any]:
    """`["region=eu", "limit=5"]` -> `{"region": "eu", "limit": 5}`: JSON values, else text."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise InvalidInput("--param", f"expected key=value, got {pair!r}")
        try:
            params[key] = json.loads(raw)
        except ValueError:
            params[key] = raw
    return params


def parse_params_json(text: str) -> dict[str, Any]:
    try:
        params = json.loads(text)
    except ValueError as exc:
        raise InvalidInput("--params-json", f"not valid JSON ({exc})") from None
    if not isinstance(params, dict):
        raise InvalidInput("--params-json", "must be a JSON object")
    return params


def _number(text: str, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InvalidInput("--retry", f"{name} {text!r} is not a number") from None
