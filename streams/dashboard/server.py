"""The status page's server: read-only, stdlib only, bound to 127.0.0.1 by default.

It wires three parts and owns their threads: the refresher (streams.dashboard.refresher), the
one thread that reads the read model and publishes snapshots; the HTTP server
(streams.dashboard.httpd), whose request threads only read them, and answer by
streams.dashboard.routes; and the readers of the timeline (a stream's view and listed
bypasses from the model, under its lock, and `commits`: streams.dashboard.history).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from streams.clock import now_ms
from streams.dashboard import timeline
from streams.dashboard.httpd import DashboardHTTPServer
from streams.dashboard.metrics import PageMetrics
from streams.dashboard.pipelines import PipelinesReader
from streams.dashboard.refresher import Pipelines, Refresher, Sources
from streams.dashboard.sources_reader import SourcesReader
from streams.dashboard.state import ReadModelSource, Snapshot
from streams.kafka.settings import KafkaSettings
from streams.outages import HealthReader, SourceOutage
from streams.topics import Topics

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080


class DashboardServer:
    """The status page in background threads: `start()`, then `url`, then `stop()` (once).

    Give it Kafka `settings` and a topic `prefix` to read the cluster, or a ready `model`
    (tests). It owns the model either way and closes it on `stop()`. Port 0 picks a free one.
    """

    def __init__(
        self,
        settings: KafkaSettings | None = None,
        prefix: str = "tidemark",
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        *,
        model: ReadModelSource | None = None,
        refresh_interval_s: float = 1.0,
        clock: Callable[[], int] = now_ms,
        outages: Callable[[int], list[SourceOutage]] | None = None,
        commits: timeline.CommitHistory | None = None,
        pipelines: Pipelines | None = None,
        sources: Sources | None = None,
    ) -> None:
        self.settings = settings or KafkaSettings()
        self.prefix = prefix
        self.host = host
        self.port = port
        self.clock = clock
        # outages: the sources in outage at a time; None: read from `health` once started
        # pipelines: the registry's pipelines; None: read from `pipelines` once started
        # sources: the Sources view; None: read from `sources` and `health` once started
        self._refresher = Refresher(clock, refresh_interval_s, model, outages, pipelines, sources)
        self._metrics = PageMetrics(self._refresher.snapshot, clock)
        self._health: HealthReader | None = None
        self._sources: SourcesReader | None = None
        self._pipelines: PipelinesReader | None = None
        self._commits = commits  # the timeline's reads of `commits`; None: read from the topic
        self._stopping = threading.Event()
        self._httpd: DashboardHTTPServer | None = None
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        """The page's address, with the bound port (useful with port 0)."""
        if self._httpd is None:
            raise RuntimeError("the dashboard server is not started")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._httpd.server_address[1]}/"

    def snapshot(self) -> Snapshot:
        return self._refresher.snapshot()

    def refresh_once(self) -> None:
        """One refresh now (streams.dashboard.refresher.Refresher.refresh_once)."""
        self._refresher.refresh_once()

    def health(self, now_ms: int) -> tuple[HTTPStatus, dict[str, Any]]:
        """200 while refreshes succeed; 503 before the first one, or once they go stale."""
        return self._refresher.health(now_ms)

    def metrics(self) -> bytes:
        """The page's own metrics, as Prometheus reads them (streams.dashboard.metrics)."""
        return self._metrics.exposition()

    def served(self, path: str, status: int) -> None:
        self._metrics.served(path, status)

    def start(self) -> DashboardServer:
        """Bind the port (OSError if taken), then serve and refresh in two daemon threads."""
        self._httpd = DashboardHTTPServer(self, (self.host, self.port))
        refresher = self._refresher
        if refresher.model is None:
            from streams.readmodel import ReadModel

            try:
                refresher.model = ReadModel(self.settings, self.prefix)
                topics = Topics(self.prefix)
                if refresher.outages is None or refresher.sources is None:
                    self._health = HealthReader(self.settings, topics.health)
                if refresher.outages is None and self._health is not None:
                    refresher.outages = self._health.outages
                if refresher.sources is None and self._health is not None:
                    self._sources = SourcesReader(self.settings, topics.sources, self._health)
                    refresher.sources = self._sources.document
                if refresher.pipelines is None:
                    self._pipelines = PipelinesReader(self.settings, topics)
                    refresher.pipelines = self._pipelines.docs
                if self._commits is None:
                    from streams.dashboard.history import KafkaCommitHistory

                    self._commits = KafkaCommitHistory(self.settings, topics.commits)
            except BaseException:
                self._httpd.server_close()
                self._httpd = None
                raise
        self._threads = [
            threading.Thread(
                target=refresher.run, args=(self._stopping,), name="dashboard-refresh", daemon=True
            ),
            threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.2},
                name="dashboard-http",
                daemon=True,
            ),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wait for both threads, close the read model. Safe to call twice."""
        self._stopping.set()
        if self._httpd is not None:
            if self._threads:  # shutdown() waits for serve_forever, so only once it runs
                self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        for thread in self._threads:
            thread.join(15)
        self._threads = []
        if self._refresher.model is not None:
            self._refresher.model.close()
            self._refresher.model = None
        if self._pipelines is not None:  # ours: a restart makes a new one
            self._refresher.pipelines = None
        if self._sources is not None:
            self._refresher.sources = None
        for reader in (self._sources, self._health, self._commits, self._pipelines):
            if reader is not None:
                reader.close()
        self._health = self._commits = self._pipelines = self._sources = None

    def __enter__(self) -> DashboardServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def timeline(self, path: str) -> tuple[HTTPStatus, dict[str, Any]]:
        """The answer to `GET /api/streams/<id>/timeline` (streams.dashboard.timeline)."""
        model = self._refresher.model
        if model is None:
            return timeline.answer(path, lambda _: None, lambda _: (), self._commits, self.clock())
        return timeline.answer(path, model.stream, model.bypasses_of, self._commits, self.clock())
