"""Durations and times as people type and read them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.errors import InvalidInput
from streams.humanize import (
    format_duration,
    format_duration_rounded,
    format_time,
    parse_duration_ms,
    parse_time_ms,
)

NOW = 1_795_946_400_000  # 2026-11-29T10:00:00Z


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("500ms", 500),
        ("15s", 15_000),
        ("1m", 60_000),
        ("5m", 300_000),
        ("1h", 3_600_000),
        ("1d", 86_400_000),
        ("1h30m", 5_400_000),
        ("1m 30s", 90_000),
        ("1.5s", 1_500),
        ("0s", 0),
        ("250", 250),
        (" 2M ", 120_000),
    ],
)
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "5x", "-5s", "1.0005s", "m", "5 minutes", "1e3", "²"])
def test_bad_durations_name_the_field(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_duration_ms(text, "--window")
    assert caught.value.field == "--window"
    assert repr(text) in caught.value.reason


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("2026-11-29T10:00:00Z", NOW),
        ("2026-11-29T11:00:00+01:00", NOW),
        ("2026-11-29T10:00:00.250Z", NOW + 250),
        ("now", NOW),
        ("now-10m", NOW - 600_000),
        ("now+1h", NOW + 3_600_000),
        ("NOW - 1d", NOW - 86_400_000),
        (str(NOW), NOW),
        ("0", 0),  # the beginning of time: `replay --from 0` is everything
        ("100000000000", 100_000_000_000),
    ],
)
def test_times(text: str, ms: int) -> None:
    assert parse_time_ms(text, NOW) == ms


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("2026-11-29T10:00:00", "no time zone"),
        ("yesterday", "not a time"),
        ("now-5x", "not a duration"),
        ("1969-12-31T00:00:00Z", "before 1970"),
        ("1795946400", "epoch seconds"),  # seconds, not ms: would mean 1970-01-21
    ],
)
def test_bad_times_name_the_field(text: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_time_ms(text, NOW, "--start")
    assert caught.value.field == "--start"
    assert reason in caught.value.reason


def test_times_are_shown_in_utc_with_milliseconds_only_when_needed() -> None:
    assert format_time(NOW) == "2026-11-29T10:00:00Z"
    assert format_time(NOW + 5) == "2026-11-29T10:00:00.005Z"
    assert format_time(0) == "1970-01-01T00:00:00Z"
    assert format_time(2**53) == str(2**53)  # beyond year 9999: plain epoch ms


def test_durations_are_shown_exactly_or_to_a_number_of_units() -> None:
    assert format_duration(90_000) == "1m30s"
    assert format_duration(0) == "0s"
    assert format_duration(-1_500) == "-1s500ms"
    assert format_duration(93_784_005) == "1d2h3m4s5ms"
    assert format_duration(93_784_005, parts=2) == "1d2h"
    assert format_duration(3_605_000, parts=2) == "1h"
    assert format_duration(450, parts=2) == "450ms"


@given(st.integers(min_value=0, max_value=10**15))
def test_exact_durations_read_back(ms: int) -> None:
    assert parse_duration_ms(format_duration(ms)) == ms


@given(st.integers(min_value=0, max_value=253_402_300_799_999))
def test_times_read_back(ms: int) -> None:
    assert parse_time_ms(format_time(ms), NOW) == ms


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (10_872, "11s"),
        (10_499, "10s"),
        (250_400, "4m10s"),
        (250_600, "4m11s"),
        (3_599_600, "1h"),  # 59m59.6s rounds up to the hour
        (3_630_000, "1h1m"),  # 1h0m30s: rounded to minutes
        (93_784_005, "1d2h"),
        (872, "872ms"),
        (0, "0s"),
        (-10_872, "-11s"),
    ],
)
def test_format_duration_rounded_shows_at_most_two_units_rounded(ms: int, text: str) -> None:
    assert format_duration_rounded(ms) == text
