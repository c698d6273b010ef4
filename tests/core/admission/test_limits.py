"""A source's limits: defaults, the JSON object both ways, and every bad field named."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.core.admission import SourceLimits, limits_from_dict, limits_to_dict
from streams.core.admission.limits import MAX_RATE_PER_S, MAX_SOURCE_IN_FLIGHT
from streams.errors import InvalidInput


def test_defaults_are_unlimited_with_a_paced_recovery_from_four() -> None:
    limits = SourceLimits.unlimited("thanos-eu")
    assert limits == SourceLimits("thanos-eu")
    assert limits.is_unlimited
    assert (limits.max_in_flight, limits.rate_per_s, limits.burst) == (None, None, None)
    assert (limits.backfill_share, limits.pace_start) == (0.2, 4)


@pytest.mark.parametrize(("rate", "burst"), [(0.5, 1), (1, 1), (2.5, 3), (10, 10), (1e6, 10**6)])
def test_burst_defaults_to_a_second_of_the_rate_at_least_one(rate: float, burst: int) -> None:
    limits = SourceLimits("s", rate_per_s=rate)
    assert limits.burst == burst and type(limits.rate_per_s) is float
    assert not limits.is_unlimited


def test_the_json_object_round_trips() -> None:
    limits = SourceLimits("s", max_in_flight=20, rate_per_s=5, backfill_share=0.5, pace_start=2)
    d = limits_to_dict(limits)
    assert d == {
        "source": "s",
        "max_in_flight": 20,
        "rate_per_s": 5.0,
        "burst": 5,
        "backfill_share": 0.5,
        "pace_start": 2,
    }
    assert limits_from_dict(d) == limits
    assert limits_from_dict({"source": "s"}) == SourceLimits("s")


limits_strategy = st.builds(
    SourceLimits,
    source=st.text(min_size=1, max_size=12),
    max_in_flight=st.none() | st.integers(1, MAX_SOURCE_IN_FLIGHT),
    rate_per_s=st.none() | st.floats(1e-3, MAX_RATE_PER_S),
    backfill_share=st.floats(0, 0.99),
    pace_start=st.integers(1, MAX_SOURCE_IN_FLIGHT),
)


@given(limits_strategy)
def test_every_valid_limits_round_trip(limits: SourceLimits) -> None:
    assert limits_from_dict(limits_to_dict(limits)) == limits


def _raises(field: str, **d: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        limits_from_dict(d)
    assert caught.value.field == field, caught.value
    return caught.value


def test_source_is_required_and_checked_as_a_streams() -> None:
    _raises("source")
    _raises("source", source="")
    _raises("source", source="x" * 201)
    assert "string" in _raises("source", source=3).reason


def test_max_in_flight_is_an_integer_from_one_to_a_million_or_null() -> None:
    assert "integer" in _raises("max_in_flight", source="s", max_in_flight=2.0).reason
    _raises("max_in_flight", source="s", max_in_flight=True)
    _raises("max_in_flight", source="s", max_in_flight=0)
    _raises("max_in_flight", source="s", max_in_flight=MAX_SOURCE_IN_FLIGHT + 1)
    assert limits_from_dict({"source": "s", "max_in_flight": None}).max_in_flight is None


def test_rate_per_s_is_a_positive_finite_number_up_to_a_million_or_null() -> None:
    assert "above 0" in _raises("rate_per_s", source="s", rate_per_s=0).reason
    _raises("rate_per_s", source="s", rate_per_s=-1)
    _raises("rate_per_s", source="s", rate_per_s=float("nan"))
    _raises("rate_per_s", source="s", rate_per_s=MAX_RATE_PER_S * 2)
    _raises("rate_per_s", source="s", rate_per_s="5")


def test_burst_is_at_least_one_and_only_with_a_rate() -> None:
    assert "rate_per_s" in _raises("burst", source="s", burst=5).reason
    _raises("burst", source="s", rate_per_s=5, burst=0)
    _raises("burst", source="s", rate_per_s=5, burst=1.5)
    assert limits_from_dict({"source": "s", "rate_per_s": 5, "burst": 50}).burst == 50


def test_backfill_share_is_from_zero_to_below_one() -> None:
    assert "below 1" in _raises("backfill_share", source="s", backfill_share=1).reason
    _raises("backfill_share", source="s", backfill_share=-0.1)
    _raises("backfill_share", source="s", backfill_share=None)
    assert limits_from_dict({"source": "s", "backfill_share": 0}).backfill_share == 0.0


def test_pace_start_is_an_integer_at_least_one() -> None:
    _raises("pace_start", source="s", pace_start=0)
    _raises("pace_start", source="s", pace_start=4.0)
    _raises("pace_start", source="s", pace_start=None)


def test_an_unknown_field_is_named_and_so_is_a_non_object() -> None:
    assert "not a field" in _raises("max_inflight", source="s", max_inflight=3).reason
    with pytest.raises(InvalidInput) as caught:
        limits_from_dict(["s"])
    assert caught.value.field == "limits"
