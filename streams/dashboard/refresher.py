"""The status page's refresher: one thread reads the topics and publishes what it read.

It calls the read model's `refresh()` every interval (at once again while the topics are still
being read), copies only the views that changed since the last refresh into the streams table,
and publishes a new `Snapshot` for request threads to read; a failed refresh keeps the last
good one and says why. Whether refreshes keep up is the page's health (`/healthz`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

from streams.dashboard.state import ReadModelSource, Snapshot
from streams.dashboard.table import StreamTable
from streams.outages import SourceOutage

log = logging.getLogger(__name__)

STALE_AFTER_MS = 10_000
# (now_ms, each stream's pipeline) -> each pipeline's doc (streams.dashboard.pipelines)
Pipelines = Callable[[int, Callable[[], Mapping[str, str]]], list[dict[str, Any]]]
# now_ms -> the Sources view's document (streams.dashboard.sources)
Sources = Callable[[int], dict[str, Any]]


class Refresher:
    """The read model's one refreshing thread and the snapshots it publishes.

    `model`, `outages` (the sources in outage at a time), `pipelines` (the registry's
    pipelines, streams.dashboard.pipelines) and `sources` (the Sources view,
    streams.dashboard.sources) may be set after construction, before the thread starts;
    `refresh_once` does nothing without a model.
    """

    def __init__(
        self,
        clock: Callable[[], int],
        interval_s: float,
        model: ReadModelSource | None = None,
        outages: Callable[[int], list[SourceOutage]] | None = None,
        pipelines: Pipelines | None = None,
        sources: Sources | None = None,
    ) -> None:
        self.clock = clock
        self.interval_s = interval_s
        self.model = model
        self.outages = outages
        self.pipelines = pipelines
        self.sources = sources
        self._table = StreamTable()  # shared by every snapshot; changed in place, locked
        self._snapshot = Snapshot(self._table)
        self._lock = threading.Lock()

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snapshot

    def run(self, stopping: threading.Event) -> None:
        """Refresh until `stopping` is set: every interval, or at once while still behind."""
        while not stopping.is_set():
            self.refresh_once()
            snap = self.snapshot()  # still reading the topics: on at once, not in a second
            behind = not snap.caught_up and snap.refresh_error is None
            stopping.wait(0 if behind else self.interval_s)

    def refresh_once(self) -> None:
        """Catch up with the topics and publish a new snapshot; keep the old one on failure.

        The refresher thread calls it; a test may too, while that thread sleeps (the read
        model wants one refreshing thread at a time).
        """
        model = self.model
        if model is None:
            return
        try:
            model.refresh()
            fresh = Snapshot.read(model, self._table, self.clock())
            if self.outages is not None:
                outages = tuple(self.outages(fresh.refreshed_ms or self.clock()))
                fresh = dataclasses.replace(fresh, outages=outages)
            if self.pipelines is not None:
                docs = self.pipelines(fresh.refreshed_ms or self.clock(), self._table.pipelines)
                fresh = dataclasses.replace(fresh, pipelines=tuple(docs))
            if self.sources is not None:
                doc = self.sources(fresh.refreshed_ms or self.clock())
                fresh = dataclasses.replace(fresh, sources=doc)
        except Exception as exc:  # the page must keep serving the last good data
            error = f"{type(exc).__name__}: {exc}"[:500]
            if error != self.snapshot().refresh_error:  # log a lasting failure once
                log.warning("dashboard: read model refresh failed: %s", exc)
            with self._lock:
                self._snapshot = dataclasses.replace(self._snapshot, refresh_error=error)
            return
        if self.snapshot().refresh_error is not None:
            log.info("dashboard: read model refresh works again")
        with self._lock:
            self._snapshot = fresh

    def health(self, now_ms: int) -> tuple[HTTPStatus, dict[str, Any]]:
        """200 while refreshes succeed; 503 before the first one, or once they go stale."""
        snap = self.snapshot()
        if snap.refreshed_ms is None:
            return HTTPStatus.SERVICE_UNAVAILABLE, {"status": "starting", "refreshed_ms": None}
        if now_ms - snap.refreshed_ms > STALE_AFTER_MS:
            return HTTPStatus.SERVICE_UNAVAILABLE, {
                "status": "stale",
                "refreshed_ms": snap.refreshed_ms,
            }
        return HTTPStatus.OK, {"status": "ok", "refreshed_ms": snap.refreshed_ms}
