"""Progress lag and windows in flight, computed when Prometheus scrapes from what the metrics'
hooks track (streams.coordinator.telemetry.metrics): O(streams), no table reads; and the
hooks' histograms (`Histogram`, and `DispatchDelay`: live apart from catching up)."""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Protocol

from prometheus_client.core import (
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from streams.core import StreamConfig
from streams.core.admission import LIVE, classify

PROGRESS_BUCKETS = (
    *(15, 30, 60, 120, 300, 600, 1800, 3600),
    *(4 * 3600, 12 * 3600, 86400, 7 * 86400, 30 * 86400),
)


class Tracked(Protocol):
    """What the collector reads: CoordinatorMetrics' tracked streams."""

    @property
    def windows_in_flight(self) -> int: ...

    def downstreams(self) -> list[tuple[str, int]]: ...


class ProgressCollector:
    """Computes progress lag and windows in flight at scrape time: O(streams), no table reads."""

    def __init__(
        self,
        metrics: Tracked,
        top_laggards: int,
        behind_threshold_s: float,
        clock_ms: Callable[[], int],
    ) -> None:
        self._metrics = metrics
        self._top = top_laggards
        self._threshold_s = behind_threshold_s
        self._clock_ms = clock_ms

    def describe(self) -> Iterable[Metric]:
        return list(self._families())

    def collect(self) -> Iterable[Metric]:
        now_ms = self._clock_ms()
        streams = self._metrics.downstreams()
        # Sorted marks answer every "how many lag more than x" with one bisect; a mark after
        # now is no lag at all.
        marks = sorted(map(itemgetter(1), streams))
        lagging = bisect_right(marks, now_ms)
        total_s = (now_ms * lagging - sum(marks[:lagging])) / 1000
        buckets = [
            (bucket_label(bound), float(len(marks) - bisect_left(marks, now_ms - bound * 1000)))
            for bound in PROGRESS_BUCKETS
        ]
        buckets.append(("+Inf", float(len(marks))))
        behind = bisect_left(marks, now_ms - self._threshold_s * 1000)
        in_flight, histogram, top, streams_behind = self._families()
        in_flight.add_metric([], self._metrics.windows_in_flight)
        histogram.add_metric([], buckets, total_s)
        # The top laggards are the smallest marks (heapq.nlargest of the lag, in C).
        for stream_id, ms in heapq.nsmallest(self._top, streams, key=itemgetter(1)):
            top.add_metric([stream_id], max(0, now_ms - ms) / 1000)
        streams_behind.add_metric([f"{self._threshold_s:g}"], behind)
        return [in_flight, histogram, top, streams_behind]

    def _families(
        self,
    ) -> tuple[GaugeMetricFamily, GaugeHistogramMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                "tidemark_windows_in_flight", "Windows dispatched and awaiting a result."
            ),
            GaugeHistogramMetricFamily(
                "tidemark_progress_lag_seconds",
                "now - downstream_ms over the owned streams (a snapshot at scrape time).",
            ),
            GaugeMetricFamily(
                "tidemark_progress_lag_top_seconds",
                f"Progress lag of the {self._top} owned streams furthest behind.",
                labels=["stream_id"],
            ),
            GaugeMetricFamily(
                "tidemark_streams_behind",
                "Owned streams whose progress lag exceeds the threshold (seconds).",
                labels=["threshold"],
            ),
        )


class Histogram:
    """Observations counted into fixed buckets: plain ints, folded into Prometheus at scrape."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # a bucket holds values <= its bound
        self.sum += value

    def family(self, name: str, documentation: str) -> HistogramMetricFamily:
        return HistogramMetricFamily(
            name, documentation, buckets=self.buckets(), sum_value=self.sum
        )

    def buckets(self) -> list[tuple[str, float]]:
        """The cumulative buckets, as Prometheus exposes them."""
        buckets, running = [], 0
        for bound, count in zip((*self.bounds, float("inf")), list(self.counts), strict=True):
            running += count
            buckets.append((bucket_label(bound), float(running)))
        return buckets


class DispatchDelay:
    """`tidemark_dispatch_delay_seconds{class}`: a window's dispatch time minus its due time,
    apart for a stream's live window (its end within one window of the dispatch:
    streams.core.admission.classify) and a catching-up one, so that a backlog does not read as
    live latency."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.live = Histogram(bounds)
        self.catchup = Histogram(bounds)

    def observe(self, config: StreamConfig, end_ms: int, due_ms: int, dispatched_ms: int) -> None:
        late_ms = dispatched_ms - due_ms
        live = classify(end_ms, dispatched_ms - config.delay_ms, config.window_ms, "live") is LIVE
        (self.live if live else self.catchup).observe(late_ms / 1000 if late_ms > 0 else 0)

    def family(self) -> HistogramMetricFamily:
        family = HistogramMetricFamily(
            "tidemark_dispatch_delay_seconds",
            "How long after it was due a window was dispatched, for live windows and for "
            "catching-up ones.",
            labels=["class"],
        )
        for value, histogram in (("live", self.live), ("catchup", self.catchup)):
            family.add_metric([value], histogram.buckets(), histogram.sum)
        return family


def bucket_label(bound: float) -> str:
    """A bucket bound as prometheus_client's own histograms write it ("15.0", "+Inf")."""
    return "+Inf" if bound == float("inf") else repr(float(bound))
