"""Fixtures for pipeline tests: a backfilled Prometheus, an OTLP receiver, a task factory.

The data lives three hours in the past around one window ``(T, T+60s]`` with step 15 s:

- ``tm_a``: samples at T-15s, T, T+15s, T+30s, T+45s (the last at :45; the one at T belongs
  to the previous window);
- ``tm_b``: samples at T+15s … T+60s, for nodes n1 and n2 of cluster c1 and node n9 of c2;
- ``tm_c``: samples at T+15s and T+30s (the last at :30).

Nothing lies in ``EMPTY_OFFSET_MS`` after T, which gives an empty window.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from streams import testing
from streams.handler import Task
from streams.pipelines.prometheus_otlp import MetricsPipeline
from streams.pipelines.prometheus_otlp_async import AsyncMetricsPipeline
from streams.testing import HandlerRunner
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.prometheus import PrometheusServer, Sample

STEP_MS = 15_000
WINDOW_MS = 60_000
EMPTY_OFFSET_MS = 10 * 60_000
STREAM_ID = "cluster-c1"


@dataclass(frozen=True)
class Data:
    """Where the backfilled data sits: the window start ``t_ms`` (a whole minute)."""

    t_ms: int

    def window(self, offset_ms: int = 0) -> tuple[int, int]:
        start_ms = self.t_ms + offset_ms
        return start_ms, start_ms + WINDOW_MS

    def samples(self) -> list[Sample]:
        t, s = self.t_ms, 1_000
        c1n1 = {"cluster": "c1", "node": "n1"}
        out = [Sample("tm_a", t + k * s, float(k), c1n1) for k in (-15, 0, 15, 30, 45)]
        for labels in (c1n1, {"cluster": "c1", "node": "n2"}, {"cluster": "c2", "node": "n9"}):
            out += [Sample("tm_b", t + k * s, float(k) + 0.5, labels) for k in (15, 30, 45, 60)]
        out += [Sample("tm_c", t + k * s, float(k), c1n1) for k in (15, 30)]
        return out


def make_task(start_ms: int, end_ms: int, params: dict[str, Any], attempt: int = 1) -> Task:
    """A task as the coordinator would dispatch it for ``(start_ms, end_ms]`` (the test kit's
    factory, with this module's stream and step)."""
    return testing.make_task(
        STREAM_ID,
        params=params,
        start_ms=start_ms,
        end_ms=end_ms,
        step_ms=STEP_MS,
        attempt=attempt,
        timeout_ms=60_000,
    )


@pytest.fixture(scope="module")
def data() -> Data:
    three_hours_ago_ms = time.time_ns() // 1_000_000 - 3 * 3_600_000
    return Data(three_hours_ago_ms // WINDOW_MS * WINDOW_MS)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory, data: Data) -> Iterator[PrometheusServer]:
    """One backfilled Prometheus shared by a test module (it only serves reads)."""
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"))
    server.backfill(data.samples())
    with server:
        yield server


@pytest.fixture
def own_prometheus(tmp_path: Path, data: Data) -> Iterator[PrometheusServer]:
    """A Prometheus of the test's own, for tests that stop and start it."""
    server = PrometheusServer(tmp_path / "prometheus")
    server.backfill(data.samples())
    with server:
        yield server


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as started:
        yield started


def metrics_pipeline(kind: str, **options: Any) -> MetricsPipeline | HandlerRunner:
    """The ``metrics`` pipeline (``kind`` "threads") or ``async-metrics`` ("async", through
    the test kit's runner: one loop for every call, ``aclose`` at ``close``)."""
    if kind == "threads":
        return MetricsPipeline(**options)
    return HandlerRunner(AsyncMetricsPipeline(**options))


@pytest.fixture(params=["threads", "async"])
def pipeline_kind(request: pytest.FixtureRequest) -> str:
    """Each metrics test runs on both pipelines: they make the same decisions."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def pipeline(pipeline_kind: str) -> Iterator[MetricsPipeline | HandlerRunner]:
    handler = metrics_pipeline(pipeline_kind, connect_timeout_ms=1_000, read_timeout_ms=3_000)
    yield handler
    handler.close()
