"""What operators see of the outage guard: the sources in outage, read from the `health` topic.

The coordinators decide from the same entries (streams.coordinator.health); this is the read
side for `tidemark status` and the status page, with the same policy and expiry (from the
environment, as the coordinators read them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from streams.coordinator.settings import CoordinatorSettings
from streams.core import OutagePolicy, SourceCounts, in_outage
from streams.humanize import format_duration
from streams.kafka.compacted import LatestEntries
from streams.kafka.settings import KafkaSettings
from streams.wire import HealthMessage, decode_health


@dataclass(frozen=True, slots=True)
class SourceOutage:
    source: str
    failing: int
    total: int
    since_ms: int | None  # the earliest a coordinator has seen it in outage (None: unknown)

    def line(self, now_ms: int) -> str:
        """ "source thanos-eu-1 in outage for 12m: 840 of 1,000 streams failing; bypasses held"."""
        since = ""
        if self.since_ms is not None:  # whole seconds, the two largest units: "12m", "1h5m"
            held_ms = max(0, now_ms - self.since_ms)
            since = f" for {format_duration(held_ms - held_ms % 1000, parts=2)}"
        return (
            f"source {self.source} in outage{since}: {self.failing:,} of {self.total:,} "
            "streams failing; bypasses held"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "failing": self.failing,
            "total": self.total,
            "since_ms": self.since_ms,
        }


def is_fresh(entry: HealthMessage, now_ms: int, stale_ms: int) -> bool:
    """Whether an entry counts at `now_ms`: published less than `stale_ms` before (the
    coordinators' rule, streams.coordinator.health; a dead owner's entries stop counting)."""
    return now_ms - entry.published_ms < stale_ms


def outages_of(
    entries: Iterable[HealthMessage], now_ms: int, policy: OutagePolicy, stale_ms: int
) -> list[SourceOutage]:
    """The sources in outage over the fresh entries, by name."""
    sums: dict[str, list[int]] = {}
    since: dict[str, int] = {}
    for entry in entries:
        if not is_fresh(entry, now_ms, stale_ms):
            continue
        for source, counts in entry.sources.items():
            acc = sums.setdefault(source, [0, 0])
            acc[0] += counts.failing
            acc[1] += counts.total
            started = counts.outage_since_ms
            if started is not None and (source not in since or started < since[source]):
                since[source] = started
    return [
        SourceOutage(source, failing, total, since.get(source))
        for source, (failing, total) in sorted(sums.items())
        if in_outage(SourceCounts(failing, total), policy)
    ]


class HealthReader:
    """The `health` topic read to its end, each call going on where the last one stopped."""

    def __init__(self, settings: KafkaSettings, topic: str) -> None:
        self._entries = LatestEntries(settings, topic, decode_health)

    def refresh(self, timeout_s: float) -> list[HealthMessage]:
        return list(self._entries.read(timeout_s).values())

    def outages(self, now_ms: int, timeout_s: float = 5.0) -> list[SourceOutage]:
        """Read on, and the sources in outage now (the guard's settings from the environment)."""
        coordinator = CoordinatorSettings.from_env()
        entries = self.refresh(timeout_s)
        return outages_of(entries, now_ms, coordinator.outage, coordinator.health_stale_ms)

    def close(self) -> None:
        self._entries.close()


def read_outages(
    settings: KafkaSettings, topic: str, now_ms: int, timeout_s: float
) -> list[SourceOutage]:
    """The sources in outage now, under the guard's settings from the environment."""
    reader = HealthReader(settings, topic)
    try:
        return reader.outages(now_ms, timeout_s)
    finally:
        reader.close()
