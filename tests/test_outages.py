"""The operators' view of the outage guard: sources in outage from `health` entries, the line."""

from __future__ import annotations

from streams.core import OutagePolicy
from streams.outages import SourceOutage, outages_of
from streams.wire import HealthMessage, SourceCountsModel

NOW_MS = 1_795_946_400_000


def _entry(
    partition: int, published_ms: int, since_ms: int | None = None, **counts: tuple[int, int]
) -> HealthMessage:
    sources = {
        source: SourceCountsModel(failing=f, total=t, outage_since_ms=since_ms)
        for source, (f, t) in counts.items()
    }
    return HealthMessage(
        partition=partition, owner="c1", published_ms=published_ms, sources=sources
    )


def test_the_status_line_reads_as_the_issue_says() -> None:
    outage = SourceOutage("thanos-eu-1", 840, 1_000, NOW_MS - 12 * 60_000)
    assert outage.line(NOW_MS) == (
        "source thanos-eu-1 in outage for 12m: 840 of 1,000 streams failing; bypasses held"
    )
    odd = SourceOutage("s", 3, 3, NOW_MS - 3_725_743).line(NOW_MS)  # 1h2m5.743s
    assert odd == "source s in outage for 1h2m: 3 of 3 streams failing; bypasses held"
    soon = SourceOutage("s", 3, 3, NOW_MS - 9_743).line(NOW_MS)
    assert soon == "source s in outage for 9s: 3 of 3 streams failing; bypasses held"
    assert SourceOutage("s", 3, 3, None).line(NOW_MS) == (
        "source s in outage: 3 of 3 streams failing; bypasses held"
    )


def test_sources_are_summed_over_fresh_entries_with_the_earliest_start() -> None:
    entries = [
        _entry(0, NOW_MS - 1_000, NOW_MS - 60_000, S=(500, 600), R=(1, 1)),
        _entry(1, NOW_MS - 2_000, NOW_MS - 90_000, S=(340, 400)),
        _entry(2, NOW_MS - 30_000, NOW_MS - 999_000, S=(0, 5_000)),  # stale: not counted
    ]
    (outage,) = outages_of(entries, NOW_MS, OutagePolicy(), stale_ms=30_000)
    assert outage == SourceOutage("S", 840, 1_000, NOW_MS - 90_000)
    assert outage.to_json() == {
        "source": "S",
        "failing": 840,
        "total": 1_000,
        "since_ms": NOW_MS - 90_000,
    }


def test_no_outage_below_the_ratio_or_the_minimum() -> None:
    entries = [_entry(0, NOW_MS, S=(4, 10), R=(2, 2))]
    assert outages_of(entries, NOW_MS, OutagePolicy(), stale_ms=30_000) == []
