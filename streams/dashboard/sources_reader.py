"""The Sources view's data path: `{prefix}.sources` read on where it stopped, `{prefix}.health`
through the page's HealthReader (one consumer for the banner and this view), and both handed to
the pure view (streams.dashboard.sources) at each refresh. The guard's policy and staleness are
the coordinators', from the environment (as streams.outages reads them)."""

from __future__ import annotations

from typing import Any

from streams.coordinator.settings import CoordinatorSettings
from streams.dashboard.sources import SourcesView
from streams.kafka.compacted import LatestEntries
from streams.kafka.settings import KafkaSettings
from streams.outages import HealthReader, SourceOutage, outages_of
from streams.topics import Topics
from streams.wire import SourceEntry, decode_source_entry


class SourcesReader:
    """`document(now_ms)`: read both topics on, and the view's document then."""

    def __init__(self, settings: KafkaSettings, topic: str, health: HealthReader) -> None:
        coordinator = CoordinatorSettings.from_env()
        self.view = SourcesView(coordinator.outage, coordinator.health_stale_ms)
        self._health = health
        self._limits: LatestEntries[SourceEntry] = LatestEntries(
            settings, topic, decode_source_entry
        )

    def document(self, now_ms: int, timeout_s: float = 5.0) -> dict[str, Any]:
        health = self._health.refresh(timeout_s)
        limits = self._limits.read(timeout_s).values()
        return self.view.observe(health, limits, now_ms)

    def close(self) -> None:
        self._limits.close()  # the health reader is the server's


def read_sources(
    settings: KafkaSettings, topics: Topics, now_ms: int, timeout_s: float
) -> tuple[list[SourceOutage], dict[str, Any]]:
    """One read of both topics (`tidemark status`): the sources in outage, and the Sources
    view's document, its rows without a history."""
    health = HealthReader(settings, topics.health)
    limits: LatestEntries[SourceEntry] = LatestEntries(
        settings, topics.sources, decode_source_entry
    )
    try:
        entries = health.refresh(timeout_s)
        found = list(limits.read(timeout_s).values())
    finally:
        health.close()
        limits.close()
    coordinator = CoordinatorSettings.from_env()
    policy, stale_ms = coordinator.outage, coordinator.health_stale_ms
    doc = SourcesView(policy, stale_ms).observe(entries, found, now_ms)
    doc["sources"] = [{k: v for k, v in row.items() if k != "history"} for row in doc["sources"]]
    return outages_of(entries, now_ms, policy, stale_ms), doc
