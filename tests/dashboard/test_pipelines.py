"""The status page's pipelines: /api/state lists each pipeline as `tidemark pipelines list`
does, from the streams the page holds, and the page shows them in a small table.

Over a fake read model and a fake registry (its data path from the topic is
`streams.dashboard.pipelines`, with the pure rule tested in tests/test_registry.py)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from streams.dashboard.server import DashboardServer
from streams.registry import pipeline_doc, pipelines
from streams.wire import PipelineMessage
from tests.dashboard.fakes import FakeReadModel, FakeStream

NOW = 1_800_000_000_000


def entry(worker: str, published_ms: int) -> PipelineMessage:
    return PipelineMessage(route="logs", handler="windowlog:WindowLog", version="1.4",
                           worker=worker, group="tidemark-workers-logs",
                           published_ms=published_ms, interval_ms=5_000)  # fmt: skip


@pytest.fixture
def dashboard() -> Iterator[tuple[DashboardServer, list[Mapping[str, str]]]]:
    """The page over two streams of `logs`, and a registry of one live and one stale worker;
    what the registry was asked with is kept."""
    asked: list[Mapping[str, str]] = []

    def registry(now_ms: int, streams: Callable[[], Mapping[str, str]]) -> list[dict[str, Any]]:
        served = streams()
        asked.append(served)
        found = pipelines([entry("w1", now_ms - 1_000), entry("w0", now_ms - 60_000)], now_ms,
                          served)  # fmt: skip
        return [pipeline_doc(info, f"tidemark.tasks.{n}", 12, now_ms) for n, info in found.items()]

    views = [FakeStream("app-1", downstream_ms=NOW - 60_000, pipeline="logs"),
             FakeStream("app-2", downstream_ms=NOW - 60_000, pipeline="logs")]  # fmt: skip
    model = FakeReadModel(views=views)
    server = DashboardServer(model=model, port=0, refresh_interval_s=0.1, clock=lambda: NOW,
                             outages=lambda _: [], pipelines=registry)  # fmt: skip
    with server:
        assert model.refreshed.wait(5)
        yield server, asked


def test_the_state_lists_each_pipeline_with_its_live_workers_lag_and_streams(
    dashboard: tuple[DashboardServer, list[Mapping[str, str]]],
) -> None:
    server, asked = dashboard
    server.refresh_once()
    with urllib.request.urlopen(server.url + "api/state", timeout=5) as response:
        doc = json.loads(response.read())
    (logs,) = doc["pipelines"]
    assert logs["pipeline"] == "logs" and logs["lag"] == 12
    assert [w["worker"] for w in logs["live_workers"]] == ["w1"]
    assert logs["versions"] == ["1.4"] and logs["streams"] == ["app-1", "app-2"]
    assert asked[-1] == {"app-1": "logs", "app-2": "logs"}


def test_the_page_shows_the_pipelines_table(
    dashboard: tuple[DashboardServer, list[Mapping[str, str]]], browser: Browser
) -> None:
    server, _ = dashboard
    page = browser.new_page()
    page.goto(server.url)
    row = page.locator("#pipeline-rows tr").first
    expect(row).to_contain_text("logs")
    expect(row).to_contain_text("1.4")
    expect(page.locator("#pipeline-count")).to_have_text("1")
    page.close()
