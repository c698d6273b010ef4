"""Small validators shared by the config and the state codec; each raises InvalidInput."""

from __future__ import annotations

import math
from typing import Any

from streams.errors import InvalidInput

# Times and durations stay below 2**53, so that every JSON reader (JavaScript included) reads
# them exactly; it also keeps absurd inputs from growing without bound.
MAX_MS = 2**53 - 1


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
