"""Human inputs and outputs: durations like `1m30s` and times like `2026-11-29T10:00:00Z`.

Parsers raise InvalidInput(field, reason); callers pass the flag's name as `field`, so that the
message says which input was wrong. Time is an argument: `now` and `now-10m` are read against
the `now_ms` given.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation

from streams.errors import InvalidInput

UNITS_MS = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1_000, "ms": 1}
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|d|h|m|s)")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Plain integers are epoch ms; below this (1973-03-03 as ms, year 5138 as seconds) one is
# taken for epoch seconds typed by mistake, which would start a stream in 1970.
_SECONDS_LOOK_ALIKE = 100_000_000_000
_NOW = re.compile(r"now\s*(?:([+-])\s*(.+))?")
_DURATION_HELP = "use e.g. 500ms, 15s, 1m, 1h30m, 1d, or an integer of milliseconds"
_TIME_HELP = (
    "use ISO-8601 with Z or an offset (2026-11-29T10:00:00Z), now, now-10m, or epoch milliseconds"
)


def parse_duration_ms(text: str, field: str = "duration") -> int:
    """`"1m30s"` -> 90000. Units d, h, m, s, ms may be combined; a plain integer is ms."""
    raw = text.strip().lower().replace(" ", "")
    if _is_integer(raw):
        return int(raw)
    if not raw or _PART.sub("", raw):
        raise InvalidInput(field, f"{text!r} is not a duration; {_DURATION_HELP}")
    total = Decimal(0)
    for number, unit in _PART.findall(raw):
        try:
            total += Decimal(number) * UNITS_MS[unit]
        except InvalidOperation:  # pragma: no cover - the regex only admits decimals
            raise InvalidInput(field, f"{text!r} is not a duration") from None
    if total != total.to_integral_value():
        raise InvalidInput(field, f"{text!r} is not a whole number of milliseconds")
    return int(total)


def parse_time_ms(text: str, now_ms: int, field: str = "time") -> int:
    """Epoch ms of an ISO-8601 time with a zone, `now`, `now-10m`, `now+1h`, or epoch ms."""
    raw = text.strip()
    if _is_integer(raw):
        ms = int(raw)
        if 0 < ms < _SECONDS_LOOK_ALIKE:
            raise InvalidInput(
                field,
                f"{text!r} looks like epoch seconds (as milliseconds it is "
                f"{format_time(ms)}); give epoch milliseconds, e.g. {ms * 1000}",
            )
        return ms
    relative = _NOW.fullmatch(raw.lower())
    if relative:
        sign, amount = relative.groups()
        if sign is None:
            return now_ms
        delta = parse_duration_ms(amount, field)
        return now_ms + delta if sign == "+" else now_ms - delta
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidInput(field, f"{text!r} is not a time; {_TIME_HELP}") from None
    if moment.tzinfo is None:
        raise InvalidInput(field, f"{text!r} has no time zone; add Z for UTC or an offset")
    ms = (moment - _EPOCH) // timedelta(milliseconds=1)
    if ms < 0:
        raise InvalidInput(field, f"{text!r} is before 1970")
    return ms


def format_time(ms: int) -> str:
    """`2026-11-29T10:00:00Z` (with `.500` when the milliseconds are not zero), in UTC.

    A value outside the calendar's years 1 to 9999 is shown as plain epoch milliseconds.
    """
    try:
        moment = _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return str(ms)
    if ms % 1000:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def format_duration(ms: int, parts: int | None = None) -> str:
    """`90000` -> `"1m30s"`; with `parts`, only that many of the largest units (rounded down).

    Without `parts` the text is exact: `parse_duration_ms(format_duration(x)) == x`.
    """
    if ms == 0:
        return "0s"
    sign, rest = ("-", -ms) if ms < 0 else ("", ms)
    out: list[str] = []
    for unit, size in UNITS_MS.items():
        if rest >= size and (parts is None or len(out) < parts):
            out.append(f"{rest // size}{unit}")
            rest %= size
        elif out and parts is not None:
            break  # units stay adjacent: with parts=2, 3_605_000 is 1h (not 1h5s)
    return sign + "".join(out or ["0s"])


def format_duration_rounded(ms: int, parts: int = 2) -> str:
    """For a person reading: at most `parts` adjacent units, rounded (half up) to the last one
    shown, and milliseconds only below a second: 10_872 -> `11s`, 250_400 -> `4m10s`,
    3_599_600 -> `1h`, 872 -> `872ms`."""
    sign, rest = ("-", -ms) if ms < 0 else ("", ms)
    if rest < UNITS_MS["s"]:
        return sign + format_duration(rest)
    sizes = [size for unit, size in UNITS_MS.items() if unit != "ms"]
    largest = next(i for i, size in enumerate(sizes) if rest >= size)
    smallest = sizes[min(largest + parts - 1, len(sizes) - 1)]
    rounded = (rest + smallest // 2) // smallest * smallest
    return sign + format_duration(rounded, parts)


def _is_integer(text: str) -> bool:
    return text.isascii() and text.isdigit()
