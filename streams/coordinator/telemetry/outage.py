"""The outage guard's gauges, from its last decision (streams.coordinator.health)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from streams.clock import now_ms
from streams.coordinator.health import Outage


class OutageCollector:
    """The outage guard's gauges, from its last decision (streams.coordinator.health)."""

    def __init__(
        self,
        outages: Callable[[], list[Outage]],
        max_hold_ms: int,
        clock_ms: Callable[[], int] = now_ms,
    ) -> None:
        self._outages = outages
        self._max_hold_ms = max_hold_ms
        self._clock_ms = clock_ms

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        outages, now_ms = self._outages(), self._clock_ms()
        count = GaugeMetricFamily("tidemark_sources_in_outage", "Sources in outage.")
        count.add_metric([], len(outages))
        max_hold = GaugeMetricFamily(
            "tidemark_outage_max_hold_seconds",
            "How long at most a source's bypasses are held (TIDEMARK_OUTAGE_MAX_HOLD_MS).",
        )
        max_hold.add_metric([], self._max_hold_ms / 1000)
        families: list[Metric] = [count, max_hold]
        rows = [
            (o.source, (o.failing, o.total, o.held, max(0, now_ms - o.since_ms) / 1000))
            for o in outages
        ]
        for i, (name, documentation) in enumerate(
            (
                ("tidemark_outage_failing_streams", "Failing streams of a source in outage."),
                ("tidemark_outage_streams", "All streams of a source in outage."),
                ("tidemark_streams_held", "This coordinator's streams with a held bypass."),
                ("tidemark_outage_hold_seconds", "How long a source's bypasses are held."),
            )
        ):
            family = GaugeMetricFamily(name, documentation, labels=["source"])
            for source, values in rows:
                family.add_metric([source], values[i])
            families.append(family)
        return families
