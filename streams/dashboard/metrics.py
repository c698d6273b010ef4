"""The status page's own metrics, at `GET /metrics`: whether what it shows can be trusted, and
how it is used. Read at scrape time from the last snapshot (streams.dashboard.refresher):

- `tidemark_build_info{version,component="status_page"}` = 1;
- `tidemark_status_page_refresh_age_seconds`: since the last successful read of the topics
  (absent before the first; `/healthz` answers 503 past `STALE_AFTER_MS`);
- `tidemark_status_page_refresh_failing`: 1 while refreshes fail (the page shows the last good
  data and says why), else 0;
- `tidemark_status_page_caught_up`: 1 once the read model has read every topic to its end;
- `tidemark_status_page_streams`: the streams it shows; `..._sources_in_outage`: the banner's;
- `tidemark_status_page_requests_total{route,code}`: answers by route (the known paths, the
  timeline as one route, anything else as `other`: bounded labels) and HTTP status.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from streams.buildinfo import BuildInfoCollector
from streams.dashboard.state import Snapshot
from streams.dashboard.timeline import is_timeline_path

ROUTES = frozenset({"/", "/api/state", "/api/streams", "/api/sources", "/healthz", "/metrics"})


class PageMetrics:
    """The status page's registry; `served` counts each answer, `exposition` is the scrape."""

    def __init__(self, snapshot: Callable[[], Snapshot], clock: Callable[[], int]) -> None:
        self._snapshot = snapshot
        self._clock = clock
        self._served: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()  # request threads count, a scrape reads
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BuildInfoCollector(component="status_page"))
        self.registry.register(self)

    def served(self, path: str, status: int) -> None:
        route = path if path in ROUTES else "timeline" if is_timeline_path(path) else "other"
        with self._lock:
            self._served[(route, str(status))] += 1

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def collect(self) -> Iterable[Metric]:
        snap = self._snapshot()
        families: list[Metric] = []
        if snap.refreshed_ms is not None:
            age = GaugeMetricFamily(
                "tidemark_status_page_refresh_age_seconds",
                "Since the status page last read the topics successfully.",
            )
            age.add_metric([], max(0, self._clock() - snap.refreshed_ms) / 1000)
            families.append(age)
        for name, documentation, value in (
            (
                "tidemark_status_page_refresh_failing",
                "1 while the status page's refreshes fail (it shows the last good data).",
                snap.refresh_error is not None,
            ),
            (
                "tidemark_status_page_caught_up",
                "1 once the status page has read every topic to its end.",
                snap.caught_up and snap.refreshed_ms is not None,
            ),
            ("tidemark_status_page_streams", "The streams the status page shows.", len(snap.table)),
            (
                "tidemark_status_page_sources_in_outage",
                "The sources in outage the status page's banner shows.",
                len(snap.outages),
            ),
        ):
            gauge = GaugeMetricFamily(name, documentation)
            gauge.add_metric([], float(value))
            families.append(gauge)
        requests = CounterMetricFamily(
            "tidemark_status_page_requests",
            "The status page's answers by route and HTTP status.",
            labels=["route", "code"],
        )
        with self._lock:
            served = list(self._served.items())
        for (route, code), count in sorted(served):
            requests.add_metric([route, code], count)
        families.append(requests)
        return families
