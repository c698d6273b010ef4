"""`streams create|update --source`: the outage guard's source, validated like the coordinator."""

from __future__ import annotations

import pytest

from streams.commands.flags import ConfigFlags, validated
from streams.commands.views import config_rows
from streams.errors import InvalidInput

NOW_MS = 1_795_946_400_000


def test_source_sets_the_streams_source() -> None:
    config = validated(
        ConfigFlags(start="now", source="thanos-eu-1").merge({"stream_id": "a"}, NOW_MS)
    )
    assert config["source"] == "thanos-eu-1"
    assert ("--source", "thanos-eu-1") in config_rows(config)


def test_an_empty_source_clears_it_and_leaving_it_out_keeps_it() -> None:
    base = validated(ConfigFlags(start="now", source="s").merge({"stream_id": "a"}, NOW_MS))
    assert validated(ConfigFlags(window="2m").merge(base, NOW_MS))["source"] == "s"
    cleared = validated(ConfigFlags(source="").merge(base, NOW_MS))
    assert "source" not in cleared
    assert ("--source", "-") in config_rows(cleared)


def test_a_source_too_long_is_reported_naming_the_flag() -> None:
    flags = ConfigFlags(start="now", source="x" * 201)
    with pytest.raises(InvalidInput) as caught:
        validated(flags.merge({"stream_id": "a"}, NOW_MS))
    assert caught.value.field == "--source (source)"
