"""The outage banner: /api/state lists the sources in outage, and the page shows them on top.

Over a fake read model and a fake view of `health` (the banner's data path from the topic is
`streams.outages`, tested in tests/test_outages.py); the page in Debian's headless Chromium.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from streams.dashboard.server import DashboardServer
from streams.outages import SourceOutage
from tests.dashboard.conftest import OUTPUT
from tests.dashboard.fakes import FakeReadModel, FakeStream

NOW = 1_800_000_000_000
OUTAGE = SourceOutage("thanos-eu-1", 840, 1_000, NOW - 12 * 60_000)
LINE = "source thanos-eu-1 in outage for 12m: 840 of 1,000 streams failing; bypasses held"


@pytest.fixture
def dashboard() -> Iterator[tuple[DashboardServer, list[SourceOutage]]]:
    """The page over one stream, and the sources in outage it reads (a test may change them)."""
    outages: list[SourceOutage] = [OUTAGE]
    model = FakeReadModel(views=[FakeStream("cluster-1", downstream_ms=NOW - 900_000)])
    server = DashboardServer(
        model=model, port=0, refresh_interval_s=0.1, clock=lambda: NOW, outages=lambda _: outages
    )
    with server:
        assert model.refreshed.wait(5)
        yield server, outages


def test_the_state_lists_each_source_in_outage_with_its_line(
    dashboard: tuple[DashboardServer, list[SourceOutage]],
) -> None:
    server, _ = dashboard
    with urllib.request.urlopen(server.url + "api/state", timeout=5) as response:
        doc = json.loads(response.read())
    assert doc["outages"] == [
        {
            "source": "thanos-eu-1",
            "failing": 840,
            "total": 1_000,
            "since_ms": NOW - 12 * 60_000,
            "line": LINE,
        }
    ]


def test_the_page_shows_the_banner_while_a_source_is_in_outage(
    dashboard: tuple[DashboardServer, list[SourceOutage]], browser: Browser
) -> None:
    server, outages = dashboard
    page = browser.new_page(viewport={"width": 1440, "height": 600})
    page.goto(server.url)
    banner = page.locator("#outage")
    expect(banner).to_be_visible(timeout=10_000)
    expect(banner).to_have_text(LINE)
    OUTPUT.mkdir(exist_ok=True)
    page.screenshot(path=str(Path(OUTPUT) / "dashboard-outage.png"))
    outages.clear()  # the source recovered
    expect(banner).to_be_hidden(timeout=10_000)
