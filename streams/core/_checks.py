"""The bounds of every value Tidemark stores or sends, and the small validators that enforce them.

Shared by the config, the retry policies, the state codec and the wire decoders; each validator
raises InvalidInput naming the field. README.md's config table and wire contract list the bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from streams.errors import InvalidInput

# Times and durations stay below 2**53, so that every JSON reader (JavaScript included) reads
# them exactly; it also keeps absurd inputs from growing without bound. The state codec refuses
# to read back anything beyond it.
MAX_MS = 2**53 - 1
# The same bound for every integer in an input (params included): a JSON reader that reads
# numbers as doubles keeps it exact, and orjson (which refuses beyond 64 bits) can encode it.
MAX_SAFE_INT = 2**53 - 1
# The latest time the core is built for: a stream's start_ms, and the clock it runs on
# (9999-12-31T23:59:59.999Z, the last instant an ISO-8601 date can name).
MAX_TIME_MS = 253_402_300_799_999
# The longest duration of a config (window_ms, step_ms, delay_ms, task_timeout_ms,
# bypass_after_ms, retry intervals): 10 years of 365 days. Every time the core computes is at
# most a time it was given plus max_in_flight windows and one more duration (a delay, a retry or
# a timeout), so MAX_TIME_MS + (MAX_IN_FLIGHT + 1) * MAX_DURATION_MS must stay within MAX_MS
# (tests/core/test_bounds.py checks it, and that every such state reads back).
MAX_DURATION_MS = 10 * 365 * 86_400_000
# A nack's error is cut at decode (streams.wire), so that state and bypass records stay bounded.
MAX_ERROR_KIND_CHARS = 200
MAX_ERROR_MESSAGE_CHARS = 2_000


N = TypeVar("N", int, float)


@dataclass(frozen=True, slots=True)
class Bound(Generic[N]):
    """A number's range as JSON Schema states it: at least `ge` or above `gt`, at most `le`.

    The core checks with it and the wire's models are built from it, so that the two cannot
    disagree. A duration is "above 0" and a count "at least 1": the same integers, with the
    reason a rejection gives kept as it was.
    """

    ge: N | None = None
    gt: N | None = None
    le: N | None = None


def check_bounded(field: str, value: Any, bound: Bound[int]) -> int:
    """Return `value` if it is an int within `bound` (above `gt` is from `gt + 1`)."""
    minimum = bound.ge if bound.gt is None else bound.gt + 1
    return check_int(field, value, minimum, bound.le)


def check_int(
    field: str, value: Any, minimum: int | None = None, maximum: int | None = MAX_MS
) -> int:
    """Return `value` if it is an int (a bool is not) within [minimum, maximum]."""
    if type(value) is not int:
        raise InvalidInput(field, f"must be an integer, got {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise InvalidInput(field, f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidInput(field, f"must be <= {maximum}")
    return value


def check_float(field: str, value: Any, minimum: float, maximum: float | None = None) -> float:
    """Return `value` as a finite float within [minimum, maximum]; ints are accepted."""
    if type(value) is not float and type(value) is not int:
        raise InvalidInput(field, f"must be a number, got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number):
        raise InvalidInput(field, "must be finite")
    if number < minimum:
        raise InvalidInput(field, f"must be >= {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise InvalidInput(field, f"must be <= {maximum}, got {number}")
    return number


def check_str(field: str, value: Any) -> str:
    """Return `value` if it is a str."""
    if type(value) is not str:
        raise InvalidInput(field, f"must be a string, got {type(value).__name__}")
    return value
