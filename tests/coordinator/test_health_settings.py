"""The outage guard's settings, from the environment: defaults, and errors naming the variable."""

from __future__ import annotations

import pytest

from streams.coordinator.settings import CoordinatorSettings
from streams.core import OutagePolicy
from streams.errors import InvalidInput


def test_the_defaults() -> None:
    settings = CoordinatorSettings.from_env({})
    assert settings.outage == OutagePolicy(0.5, 3, 6 * 3_600_000)
    assert (settings.health_publish_ms, settings.health_stale_ms) == (1_000, 30_000)


def test_every_setting_is_read_from_the_environment() -> None:
    settings = CoordinatorSettings.from_env(
        {
            "TIDEMARK_OUTAGE_RATIO": "0.8",
            "TIDEMARK_OUTAGE_MIN_STREAMS": "10",
            "TIDEMARK_OUTAGE_MAX_HOLD_MS": "60000",
            "TIDEMARK_HEALTH_PUBLISH_MS": "500",
            "TIDEMARK_HEALTH_STALE_MS": "5000",
        }
    )
    assert settings.outage == OutagePolicy(0.8, 10, 60_000)
    assert (settings.health_publish_ms, settings.health_stale_ms) == (500, 5_000)


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({"TIDEMARK_OUTAGE_RATIO": "half"}, "TIDEMARK_OUTAGE_RATIO"),
        ({"TIDEMARK_OUTAGE_RATIO": "0"}, "TIDEMARK_OUTAGE_RATIO"),
        ({"TIDEMARK_OUTAGE_RATIO": "1.5"}, "TIDEMARK_OUTAGE_RATIO"),
        ({"TIDEMARK_OUTAGE_MIN_STREAMS": "0"}, "TIDEMARK_OUTAGE_MIN_STREAMS"),
        ({"TIDEMARK_OUTAGE_MAX_HOLD_MS": "-1"}, "TIDEMARK_OUTAGE_MAX_HOLD_MS"),
        ({"TIDEMARK_HEALTH_PUBLISH_MS": "5"}, "TIDEMARK_HEALTH_PUBLISH_MS"),
        ({"TIDEMARK_HEALTH_STALE_MS": "1000"}, "health_stale_ms"),  # not above the interval
    ],
)
def test_a_bad_setting_names_its_variable(env: dict[str, str], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        CoordinatorSettings.from_env(env)
    assert caught.value.field == field
