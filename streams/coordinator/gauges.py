"""The coordinator's gauges, computed when Prometheus scrapes: progress lag and windows in
flight (from CoordinatorMetrics' in-memory maps), the outage guard's last decision, and the
consumer lag that a background thread reads from the cluster. The metrics and their meaning are
listed in streams.coordinator.metrics.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeHistogramMetricFamily, GaugeMetricFamily, Metric

from streams.coordinator.health import Outage
from streams.kafka.lag import LagReader, LagRow
from streams.kafka.settings import KafkaSettings
from streams.topics import Topics

if TYPE_CHECKING:
    from streams.coordinator.metrics import CoordinatorMetrics

log = logging.getLogger("streams.coordinator")

PROGRESS_BUCKETS = (
    *(15, 30, 60, 120, 300, 600, 1800, 3600),
    *(4 * 3600, 12 * 3600, 86400, 7 * 86400, 30 * 86400),
)
# Consumer lag is read from the cluster at most this often, in a thread of its own.
LAG_REFRESH_S = 5.0


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class ProgressCollector:
    """Computes progress lag and windows in flight at scrape time: O(streams), no table reads."""

    def __init__(
        self,
        metrics: CoordinatorMetrics,
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


def bucket_label(bound: float) -> str:
    """A bucket bound as prometheus_client's own histograms write it ("15.0", "+Inf")."""
    return "+Inf" if bound == float("inf") else repr(float(bound))


class OutageCollector:
    """The outage guard's gauges, from its last decision (streams.coordinator.health)."""

    def __init__(
        self, outages: Callable[[], list[Outage]], clock_ms: Callable[[], int] = wall_clock_ms
    ) -> None:
        self._outages = outages
        self._clock_ms = clock_ms

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        outages, now_ms = self._outages(), self._clock_ms()
        count = GaugeMetricFamily("tidemark_sources_in_outage", "Sources in outage.")
        count.add_metric([], len(outages))
        families: list[Metric] = [count]
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


class ConsumerLagCollector:
    """Serves ``tidemark_consumer_lag`` from rows that a background thread refreshes.

    Kafka admin calls take up to seconds, so a scrape never makes them: it reads the last rows,
    which ``fetch`` refreshes every ``interval_s`` between ``start()`` and ``stop()``. Rows older
    than ``stale_after_s`` (the cluster stopped answering) are no longer served.

    It fails soft: a gauge must never take the coordinator down. Whatever ``fetch`` raises ends
    that refresh only (the last rows stay until stale), with a WARNING at most once every
    ``warn_every_s`` that counts the failures in between. ``close`` (the reader's clients) is
    called from the refresh thread itself when it ends, never under a refresh in flight.
    """

    def __init__(
        self,
        fetch: Callable[[], list[LagRow]],
        interval_s: float = LAG_REFRESH_S,
        stale_after_s: float = 60.0,
        close: Callable[[], None] | None = None,
        warn_every_s: float = 60.0,
        clock_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._interval_s = interval_s
        self._stale_after_s = stale_after_s
        self._close = close
        self._warn_every_s = warn_every_s
        self._clock_s = clock_s
        self._rows: tuple[float, list[LagRow]] | None = None  # (monotonic time, rows)
        self._updated_s: float | None = None  # wall time of the last refresh that worked
        self._failures = 0  # failed refreshes in a row
        self._unreported = 0  # of which not yet in a warning
        self._warned_s: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="consumer-lag", daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def refresh(self) -> bool:
        """Fetch the rows once; on failure keep the last ones (until stale) and log why."""
        try:
            rows = self._fetch()
        except Exception as exc:  # a bug or an untranslated client error alike: skip this one
            self._failed(exc)
            return False
        if self._failures:
            log.info("consumer lag refreshed again after %d failed refreshes", self._failures)
            self._failures = self._unreported = 0
            self._warned_s = None
        self._rows = (time.monotonic(), rows)  # one reference swap: readers see old or new
        self._updated_s = time.time()
        return True

    def _failed(self, exc: Exception) -> None:
        self._failures += 1
        self._unreported += 1
        now_s = self._clock_s()
        if self._warned_s is not None and now_s - self._warned_s < self._warn_every_s:
            return
        quiet = self._unreported - 1
        since = f" ({quiet} failed refreshes since the last warning)" if quiet else ""
        log.warning("consumer lag not refreshed: %s: %s%s", type(exc).__name__, exc, since)
        self._warned_s, self._unreported = now_s, 0

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.refresh()
                self._stop.wait(self._interval_s)
        finally:
            if self._close is not None:
                try:
                    self._close()
                except Exception:
                    log.warning("closing the consumer lag reader failed", exc_info=True)

    def describe(self) -> Iterable[Metric]:
        return list(self._families())

    def collect(self) -> Iterable[Metric]:
        lag, updated = self._families()
        snapshot = self._rows
        if snapshot is not None and time.monotonic() - snapshot[0] <= self._stale_after_s:
            for row in snapshot[1]:
                lag.add_metric([row.group, row.topic, str(row.partition)], row.lag)
        if self._updated_s is not None:
            updated.add_metric([], self._updated_s)
        return [lag, updated]

    def _families(self) -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                "tidemark_consumer_lag",
                "Records a consumer group has still to read: high watermark - committed offset.",
                labels=["group", "topic", "partition"],
            ),
            GaugeMetricFamily(
                "tidemark_consumer_lag_updated_timestamp_seconds",
                "When the consumer lag was last read from the cluster (unix time).",
            ),
        )


def consumer_groups(topics: Topics) -> tuple[str, ...]:
    """The group id prefixes whose lag a coordinator reports: its own and the workers'."""
    return (topics.app_id, f"{topics.prefix}-workers-")


def consumed_topics(topics: Topics) -> tuple[str, ...]:
    """The topics whose committed offsets the lag reader asks those groups for: every topic of
    the prefix (the coordinators read control, results, ticks and changelogs, the workers
    tasks). A group that committed none of a topic's partitions has no row for it."""
    return tuple(spec.name for spec in topics.specs(partitions=1, replication=1))


def consumer_lag_collector(kafka: KafkaSettings, topics: Topics) -> ConsumerLagCollector:
    """The collector of a coordinator: its groups' lag on its topics, one reader kept."""
    reader = LagReader(kafka, consumer_groups(topics), consumed_topics(topics))
    return ConsumerLagCollector(reader, close=reader.close)
