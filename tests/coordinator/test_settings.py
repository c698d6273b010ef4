"""The coordinator's store settings, from the environment."""

from __future__ import annotations

import pytest

from streams.coordinator.settings import CoordinatorSettings
from streams.errors import InvalidInput


def test_revoked_stores_are_kept_ten_minutes_unless_told_otherwise() -> None:
    """Kafka Streams' state.cleanup.delay.ms default."""
    assert CoordinatorSettings.from_env({}).state_cleanup_delay_ms == 600_000
    env = {"TIDEMARK_STATE_CLEANUP_DELAY_MS": "0"}
    assert CoordinatorSettings.from_env(env).state_cleanup_delay_ms == 0


def test_a_negative_cleanup_delay_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        CoordinatorSettings.from_env({"TIDEMARK_STATE_CLEANUP_DELAY_MS": "-1"})
    assert caught.value.field == "TIDEMARK_STATE_CLEANUP_DELAY_MS"
