"""The Sources panel: `/api/sources` over HTTP, and the page's table and charts in Debian's
headless Chromium. Over a fake read model and the pure view (streams.dashboard.sources) fed
with `health` and `sources` entries, an hour of them first (its data path from the topics is
streams.dashboard.sources_reader; the view's rules are tested in test_sources.py)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from streams.core import OutagePolicy
from streams.core.admission import SourceLimits
from streams.dashboard.server import DashboardServer
from streams.dashboard.sources import SourcesView
from streams.wire import HealthMessage, SourceCountsModel, SourceEntry
from tests.dashboard.conftest import OUTPUT
from tests.dashboard.fakes import FakeReadModel, FakeStream

NOW = 1_800_000_000_000
HOSTILE = '<img src=x onerror="window.__injected = 1">'
LIMITS = [SourceEntry(SourceLimits("thanos-eu-1", max_in_flight=20, rate_per_s=5.0), NOW)]


def health(at_ms: int, minute: int) -> list[HealthMessage]:
    """thanos-eu-1 on two partitions, dispatching 6 a second, in outage in its last 10 min;
    a hostile name with no limits."""
    failing = 9 if minute >= 50 else 0
    thanos = SourceCountsModel(failing=failing, total=10, in_flight=7, waiting=3, demand=10,
                               dispatched=minute * 360,
                               outage_since_ms=NOW - 600_000 if failing else None)  # fmt: skip
    other = SourceCountsModel(failing=0, total=2, in_flight=1, dispatched=minute)
    return [
        HealthMessage(partition=0, owner="c1", published_ms=at_ms, pacing={"thanos-eu-1": 8},
                      sources={"thanos-eu-1": thanos, HOSTILE: other}),
        HealthMessage(partition=1, owner="c2", published_ms=at_ms,
                      sources={"thanos-eu-1": thanos}),
    ]  # fmt: skip


@pytest.fixture
def limits() -> list[SourceEntry]:
    """The `sources` entries the view reads at each refresh (a test may add some)."""
    return list(LIMITS)


@pytest.fixture
def dashboard(limits: list[SourceEntry]) -> Iterator[DashboardServer]:
    """The page at NOW over a view that saw the hour before it, a sample a minute."""
    view = SourcesView(OutagePolicy(), stale_ms=30_000)
    for minute in range(60):
        at = NOW - (60 - minute) * 60_000
        view.observe(health(at, minute), LIMITS, at)

    def sources(now_ms: int) -> dict[str, Any]:
        return view.observe(health(now_ms, 60), limits, now_ms)

    model = FakeReadModel(views=[FakeStream("app-1", downstream_ms=NOW - 60_000)])
    server = DashboardServer(model=model, port=0, refresh_interval_s=0.1, clock=lambda: NOW,
                             outages=lambda _: [], sources=sources)  # fmt: skip
    with server:
        assert model.refreshed.wait(5)
        yield server


def get(server: DashboardServer, path: str) -> Any:
    with urllib.request.urlopen(server.url + path, timeout=5) as response:
        assert response.headers["Content-Type"] == "application/json"
        return json.loads(response.read())


def test_the_api_lists_each_source_with_its_hour(dashboard: DashboardServer) -> None:
    doc = get(dashboard, "api/sources")
    assert doc["now_ms"] == NOW and doc["sampled_ms"] == NOW
    hostile, thanos = doc["sources"]  # by name: "<" sorts first
    assert hostile["source"] == HOSTILE and hostile["limits"] is None
    assert (thanos["failing"], thanos["total"], thanos["in_outage"]) == (18, 20, True)
    assert (thanos["in_flight"], thanos["waiting"], thanos["pacing"]) == (14, 6, 8)
    assert thanos["limits"]["max_in_flight"] == 20
    history = thanos["history"]
    # A sample a minute, within the last hour: the first one (no rate yet) is an hour old.
    assert history["at_ms"] == [NOW - 3_600_000 + m * 60_000 for m in range(1, 61)]
    assert set(history["dispatches_per_s"]) == {12.0}  # 360 a minute on each partition
    assert history["failing"][-1] == 18 and history["failing"][0] == 0
    light = get(dashboard, "api/sources?history=0")
    assert "history" not in light["sources"][1] and light["sources"][1]["in_flight"] == 14
    with pytest.raises(urllib.error.HTTPError) as refused:
        get(dashboard, "api/sources?history=yes")
    assert refused.value.code == 400
    assert json.loads(refused.value.read())["parameter"] == "history"


def test_the_page_shows_the_sources_table_and_charts(
    dashboard: DashboardServer, limits: list[SourceEntry], browser: Browser
) -> None:
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(dashboard.url)
    row = page.locator("#source-rows tr[data-source='thanos-eu-1']")
    expect(row).to_be_visible(timeout=10_000)
    cells = row.locator("td")
    expect(cells.nth(1)).to_have_text("outage 10m 0s 18 of 20 failing")
    expect(cells.nth(2)).to_have_text("20 in flight, 5/s (burst 5)")
    expect(cells.nth(3)).to_have_text("14 / 20")
    expect(cells.nth(4)).to_have_text("6")
    expect(cells.nth(5)).to_have_text("8")
    chart = cells.nth(6).locator("svg.src-chart")
    expect(chart).to_have_attribute(
        "aria-label",
        "last hour: dispatches peak 12/s, now 12/s; failing streams peak 18, now 18",
    )
    assert chart.locator("polyline.src-rate").count() == 1
    assert chart.locator("polyline.src-failing").count() == 1
    expect(page.locator("#source-count")).to_have_text("2")
    # A source's name is user input: it stays text.
    other = page.locator("#source-rows tr").filter(has=page.get_by_text(HOSTILE, exact=True))
    expect(other.locator("td").nth(2)).to_have_text("none")
    assert page.locator("#source-rows img").count() == 0
    assert page.evaluate("window.__injected") is None
    # It keeps updating without asking for the histories again (no new sample).
    updates = int(page.locator("#sources").get_attribute("data-updates") or 0)
    page.wait_for_function(
        f"() => Number(document.getElementById('sources').dataset.updates) > {updates + 1}"
    )
    expect(chart).to_be_attached()
    # A source that appears between two samples gets its (empty) chart at once.
    limits.append(SourceEntry(SourceLimits("new-db", max_in_flight=2), NOW))
    new = page.locator("#source-rows tr[data-source='new-db']")
    expect(new.locator("svg.src-chart")).to_have_attribute("aria-label", "no samples yet")
    expect(new.locator("td").nth(1)).to_have_text("no fresh health")
    OUTPUT.mkdir(exist_ok=True)
    page.locator("#sources").screenshot(path=str(OUTPUT / "dashboard-sources.png"))
    page.close()
