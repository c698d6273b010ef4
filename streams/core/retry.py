"""Retry policies and the delay before a failed window's next attempt.

The delay is a pure function of the policy, the window and the attempt. Jitter comes from a hash
of `stream_id/start_ms/attempt`, never from a global random source, so that a replayed input
decides the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeAlias

from streams.core._checks import MAX_DURATION_MS, Bound, check_bounded, check_float
from streams.errors import InvalidInput

# The bounds of every retry field, by name: checked here, and read by the wire's models
# (streams.wire.config). Ints stay ints (`ge=1`, not 1.0), as the published schemas state them.
RETRY_BOUNDS: Mapping[str, Bound[int]] = MappingProxyType(
    {
        "interval_ms": Bound(gt=0, le=MAX_DURATION_MS),
        "initial_ms": Bound(gt=0, le=MAX_DURATION_MS),
        "max_ms": Bound(gt=0, le=MAX_DURATION_MS),
    }
)
RETRY_FACTOR_BOUNDS: Mapping[str, Bound[float]] = MappingProxyType(
    {"multiplier": Bound(ge=1), "jitter": Bound(ge=0, le=1)}
)
DEFAULT_JITTER = 0.0


def _check_factor(name: str, value: object) -> float:
    bound = RETRY_FACTOR_BOUNDS[name]
    minimum = 0.0 if bound.ge is None else float(bound.ge)
    maximum = None if bound.le is None else float(bound.le)
    return check_float(f"retry.{name}", value, minimum, maximum)


@dataclass(frozen=True, slots=True)
class Immediate:
    """Retry at once."""


@dataclass(frozen=True, slots=True)
class Fixed:
    """Retry `interval_ms` after each failure."""

    interval_ms: int = 60_000

    def __post_init__(self) -> None:
        check_bounded("retry.interval_ms", self.interval_ms, RETRY_BOUNDS["interval_ms"])


@dataclass(frozen=True, slots=True)
class Exponential:
    """Retry after min(max_ms, initial_ms * multiplier ** (n - 1)) for the n-th failure.

    With `jitter` j, the delay d is drawn from [d * (1 - j), d], deterministically.
    """

    initial_ms: int = 1_000
    multiplier: float = 2.0
    max_ms: int = 300_000
    jitter: float = DEFAULT_JITTER

    def __post_init__(self) -> None:
        check_bounded("retry.initial_ms", self.initial_ms, RETRY_BOUNDS["initial_ms"])
        check_bounded("retry.max_ms", self.max_ms, RETRY_BOUNDS["max_ms"])
        if self.max_ms < self.initial_ms:
            raise InvalidInput("retry.max_ms", f"must be >= initial_ms ({self.initial_ms})")
        # Normalise ints to floats so that equal policies compare and serialise equal.
        object.__setattr__(self, "multiplier", _check_factor("multiplier", self.multiplier))
        object.__setattr__(self, "jitter", _check_factor("jitter", self.jitter))


RetryPolicy: TypeAlias = Immediate | Fixed | Exponential

_UNIT = float(1 << 64)


def jitter_fraction(stream_id: str, start_ms: int, attempt: int) -> float:
    """A deterministic uniform number in [0, 1) for one attempt of one window."""
    key = f"{stream_id}/{start_ms}/{attempt}".encode()
    digest = hashlib.blake2b(key, digest_size=8).digest()
    return int.from_bytes(digest, "big") / _UNIT


def retry_delay_ms(policy: RetryPolicy, stream_id: str, start_ms: int, attempt: int) -> int:
    """How long after the failure of `attempt` (1, 2, ...) the window is dispatched again."""
    if isinstance(policy, Fixed):
        return policy.interval_ms
    if isinstance(policy, Immediate):
        return 0
    exponent = max(attempt - 1, 0)
    try:
        grown = policy.initial_ms * policy.multiplier**exponent
    except OverflowError:
        grown = float(policy.max_ms)
    delay = policy.max_ms if grown >= policy.max_ms else int(grown)
    if policy.jitter > 0.0:
        # delay - floor(delay * j * u) lies in [delay * (1 - j), delay] because u < 1.
        delay -= int(delay * policy.jitter * jitter_fraction(stream_id, start_ms, attempt))
    return delay


# A stream whose time-driven work raised (a fault of its record or of the store, not of its
# inputs) is tried again after this long: soon enough that a passing fault costs seconds, far
# enough apart that a lasting one does not spin the loop or flood the log.
RETRY_AFTER_ERROR_MS = 5000


def retry_after_error_ms(now_ms: int) -> int:
    """When a stream whose time-driven work raised at `now_ms` is tried again."""
    return now_ms + RETRY_AFTER_ERROR_MS
