"""The consumer lag of the coordinators' and the workers' groups, read from the cluster by a
background thread (streams.kafka.lag) and served at scrape time. The engines register it; the
Processor never loads it, nor the Kafka clients it needs."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from streams.kafka.lag import LagReader, LagRow
from streams.kafka.settings import KafkaSettings
from streams.topics import Topics

log = logging.getLogger("streams.coordinator")

# Consumer lag is read from the cluster at most this often, in a thread of its own.
LAG_REFRESH_S = 5.0


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


def pipeline_topics_prefix(topics: Topics) -> str:
    """What the names of the pipelines' tasks topics begin with (streams.topics.tasks_for):
    each pipeline's workers' lag on their own topic, per pipeline."""
    return topics.tasks + "."


def consumer_lag_collector(kafka: KafkaSettings, topics: Topics) -> ConsumerLagCollector:
    """The collector of a coordinator: its groups' lag on its topics, one reader kept."""
    reader = LagReader(
        kafka,
        consumer_groups(topics),
        consumed_topics(topics),
        topics_prefix=pipeline_topics_prefix(topics),
    )
    return ConsumerLagCollector(reader, close=reader.close)
