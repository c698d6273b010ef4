"""`tidemark sources` without a broker: the flags (`none` unsets), the merge into the current
limits, and errors naming the flag before anything talks to Kafka (the broker side:
tests/test_cli_sources_broker.py)."""

from __future__ import annotations

import pytest
from rich.console import Console
from typer.testing import CliRunner

from streams.cli import app
from streams.commands.source_limits import (
    check_alone,
    entry_doc,
    merge,
    parse_changes,
    sources_load_table,
)
from streams.core import OutagePolicy
from streams.core.admission import SourceLimits
from streams.dashboard.sources import SourcesView
from streams.errors import InvalidInput
from streams.wire import HealthMessage, SourceCountsModel, SourceEntry

T0 = 1_795_946_400_000


def test_flags_parse_to_fields_and_none_unsets_an_optional_one() -> None:
    given = {"max_in_flight": "none", "rate_per_s": "2.5", "burst": "4", "pace_start": None}
    assert parse_changes(given) == {"max_in_flight": None, "rate_per_s": 2.5, "burst": 4}
    assert parse_changes({"backfill_share": "0", "pace_start": "8"}) == {
        "backfill_share": 0.0,
        "pace_start": 8,
    }


@pytest.mark.parametrize(
    ("field", "text", "message"),
    [
        ("max_in_flight", "lots", "--max-in-flight: must be an integer or none, got 'lots'"),
        ("max_in_flight", "2.5", "--max-in-flight: must be an integer or none, got '2.5'"),
        ("rate_per_s", "fast", "--rate-per-s: must be a number or none, got 'fast'"),
        ("backfill_share", "none", "--backfill-share: cannot be unset (none); give a number"),
        ("pace_start", "x", "--pace-start: must be an integer, got 'x'"),
    ],
)
def test_a_flag_that_is_not_a_number_is_named(field: str, text: str, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_changes({field: text})
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"max_in_flight": 0}, "--max-in-flight (max_in_flight)"),
        ({"rate_per_s": 0.0}, "--rate-per-s (rate_per_s)"),
        ({"rate_per_s": float("nan")}, "--rate-per-s (rate_per_s)"),
        ({"burst": 0}, "--burst (burst)"),
        ({"backfill_share": 1.0}, "--backfill-share (backfill_share)"),
        ({"pace_start": 0}, "--pace-start (pace_start)"),
        ({}, "NAME (source)"),
    ],
)
def test_each_value_is_checked_alone_naming_the_flag(changes: dict, field: str) -> None:
    name = "x" * 201 if not changes else "thanos"
    with pytest.raises(InvalidInput) as caught:
        check_alone(name, changes)
    assert caught.value.field == field


def test_a_burst_alone_is_checked_against_its_own_bound_only() -> None:
    check_alone("thanos", {"burst": 3})  # its rate comes from the current limits (merge)
    with pytest.raises(InvalidInput) as caught:
        merge("thanos", None, {"burst": 3})
    assert caught.value.field == "--burst (burst)"


def test_set_starts_from_the_current_limits() -> None:
    current = SourceLimits("thanos", max_in_flight=20, backfill_share=0.3)
    merged = merge("thanos", current, {"rate_per_s": 5.0})
    assert merged == SourceLimits(
        "thanos", max_in_flight=20, rate_per_s=5.0, burst=5, backfill_share=0.3
    )
    assert merge("thanos", merged, {"max_in_flight": None}) == SourceLimits(
        "thanos", rate_per_s=5.0, backfill_share=0.3
    )
    assert merge("new", None, {}) == SourceLimits.unlimited("new")


def test_a_default_burst_follows_the_rate_and_a_set_one_stays() -> None:
    defaulted = SourceLimits("s", rate_per_s=5.0)  # burst 5, the rate's default
    assert merge("s", defaulted, {"rate_per_s": 50.0}).burst == 50
    chosen = SourceLimits("s", rate_per_s=5.0, burst=2)
    assert merge("s", chosen, {"rate_per_s": 50.0}).burst == 2
    assert merge("s", chosen, {"rate_per_s": None}) == SourceLimits("s")  # goes with the rate
    with pytest.raises(InvalidInput) as caught:
        merge("s", chosen, {"rate_per_s": None, "burst": 2})
    assert caught.value.field == "--burst (burst)"


def test_an_entry_as_json_has_every_field_and_when_it_was_applied() -> None:
    doc = entry_doc(SourceEntry(SourceLimits("s", max_in_flight=3), T0))
    assert doc == {
        "source": "s", "max_in_flight": 3, "rate_per_s": None, "burst": None,
        "backfill_share": 0.2, "pace_start": 4, "updated_ms": T0,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-in-flight", "0"], "error: --max-in-flight (max_in_flight): must be >= 1, got 0"),
        (["--rate-per-s", "-1"], "error: --rate-per-s (rate_per_s): must be >= 0.0, got -1.0"),
        (["--pace-start", "none"], "error: --pace-start: cannot be unset (none); give a number"),
        (["--backfill-share", "1"], "error: --backfill-share (backfill_share): must be below 1"),
    ],
)
def test_a_bad_value_exits_2_naming_the_flag_before_kafka(args: list[str], message: str) -> None:
    result = CliRunner().invoke(
        app, ["--bootstrap-servers", "127.0.0.1:1", "sources", "set", "thanos", *args]
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(message)


def test_every_sources_command_has_help_and_set_says_none_unsets() -> None:
    for command in ("set", "show", "list", "delete"):
        result = CliRunner().invoke(app, ["sources", command, "--help"])
        assert result.exit_code == 0 and "Usage:" in result.stdout
    text = CliRunner().invoke(app, ["sources", "set", "--help"], env={"COLUMNS": "200"}).stdout
    assert "`none` unsets an optional one" in text and "--max-in-flight N|none" in text


def test_status_shows_the_sources_view_as_a_table() -> None:
    """`tidemark status` prints the status page's Sources rows (streams.dashboard.sources)."""
    counts = SourceCountsModel(failing=9, total=10, in_flight=7, waiting=3, demand=10,
                               outage_since_ms=T0 - 725_000)  # fmt: skip
    entry = HealthMessage(partition=0, owner="c1", published_ms=T0, sources={"thanos": counts},
                          pacing={"thanos": 8})  # fmt: skip
    limits = [SourceEntry(SourceLimits("thanos", max_in_flight=20, rate_per_s=5.0), T0),
              SourceEntry(SourceLimits("idle"), T0)]  # fmt: skip
    doc = SourcesView(OutagePolicy(), 30_000).observe([entry], limits, T0)
    console = Console(width=200, record=True)
    console.print(sources_load_table(doc["sources"], T0))
    lines = [
        " ".join(line.replace("│", " ").split()) for line in console.export_text().splitlines()
    ]
    assert "idle no fresh health pacing only 0 0 -" in lines  # defaults: only paced recovery
    assert (
        "thanos in outage for 12m5s: 9 of 10 failing 20 in flight, 5/s (burst 5) 7 / 20 3 8"
        in lines
    )
