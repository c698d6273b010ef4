"""The outage banner and the window timeline in a real browser, over a real cluster.

A real broker and coordinator, a stand-in worker that acks one stream, nacks a lone one until
its windows are bypassed, and nacks the three streams of one source (an outage: the banner, and
their windows held); the DashboardServer in-process, reading `streams`, `bypassed`, `health`
and (for the timeline) a bounded tail of `commits`. Headless Chromium must see the banner, and
for a selected stream its strip: acked cells for the healthy one, bypassed ones for the lone
failure, a held one for a stream of the source in outage, user text as text, and new windows
without a reload. Screenshots: test-output/dashboard-timeline.png (the page, the lone failure
selected) and dashboard-timeline-acked.png (the healthy stream's timeline).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from streams.dashboard.server import DashboardServer
from streams.kafka.settings import KafkaSettings
from tests.dashboard.conftest import OUTPUT
from tests.dashboard.test_browser import FAST, HOSTILE_MESSAGE, WAIT_MS, row
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Feed, Responder

pytestmark = pytest.mark.broker

GUARD = {"TIDEMARK_HEALTH_PUBLISH_MS": "200"}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def outcomes(page: Page) -> list[str]:
    found: list[str] = page.locator("#timeline-strip .tl-cell").evaluate_all(
        "els => els.map(e => e.dataset.outcome)"
    )
    return found


def cell(page: Page, outcome: str) -> Locator:
    return page.locator(f'#timeline-strip .tl-cell[data-outcome="{outcome}"]')


def test_the_banner_and_the_window_timeline_in_a_real_browser(
    kafka: KafkaSettings, unique: str, tmp_path: Path, browser: Browser
) -> None:
    prefix = f"tl-{unique}"
    source = f"thanos-{unique}"
    healthy, lone = f"orders-{unique}", f"<b>flaky</b>-{unique}"
    held = [f"eu-{i}-{unique}" for i in range(3)]

    def worker(task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if task["stream_id"] == healthy:
            return "ack", {"ack_ms": task["end_ms"]}
        return "nack", {"error": {"kind": "no_data", "message": HOSTILE_MESSAGE}}

    coordinator = CoordinatorProcess(
        kafka, prefix, tmp_path / "data", tmp_path / "coord.log", env=GUARD
    )
    coordinator.start()
    try:
        coordinator.wait_ready()
        feed = Feed(kafka, prefix)
        now = now_ms()
        # Healthy: 2 s windows from 10 s ago, so that cells come while we watch.
        feed.upsert(healthy, now - now % 1000 - 10_000, window_ms=2000, step_ms=1000, **FAST)
        # The lone failure (no source): one-minute windows from 5 minutes ago, each bypassed.
        feed.upsert(lone, now - now % 60_000 - 300_000, **FAST)
        # Three streams of one source failing together: an outage, their bypasses held.
        for stream_id in held:
            feed.upsert(stream_id, now - now % 60_000 - 60_000, source=source, **FAST)
        with (
            Responder(kafka, prefix, f"worker-{unique}", worker),
            DashboardServer(kafka, prefix, port=0) as dashboard,
        ):
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            check_the_page(page, dashboard.url, source, healthy, lone, held[0])
    finally:
        coordinator.stop()


def check_the_page(page: Page, url: str, source: str, healthy: str, lone: str, held: str) -> None:
    page.goto(url)
    page.evaluate("window.__firstLoad = 'still here'")

    # The banner: the source's three failing streams are an outage.
    banner = page.locator("#outage")
    expect(banner).to_be_visible(timeout=WAIT_MS)
    expect(banner).to_contain_text(f"source {source} in outage")
    expect(banner).to_contain_text("3 of 3 streams failing; bypasses held")

    # The healthy stream: acked windows, and new ones come without a reload.
    row(page, "stream", healthy).click()
    expect(page.locator("#timeline-selected")).to_have_text(healthy)
    expect(cell(page, "acked").nth(2)).to_be_attached(timeout=WAIT_MS)
    assert set(outcomes(page)) <= {"acked", "open"}, outcomes(page)
    first_count = cell(page, "acked").count()
    expect(cell(page, "acked").nth(first_count)).to_be_attached(timeout=WAIT_MS)
    acked_title = cell(page, "acked").first.get_attribute("title") or ""
    assert re.search(r"\nacked\nattempts: 1\ncommitted at: \d{4}-\d\d-\d\d ", acked_title)
    expect(page.locator("#timeline-note")).to_contain_text("records of commits partition")
    OUTPUT.mkdir(exist_ok=True)
    page.locator("#timeline").screenshot(path=str(OUTPUT / "dashboard-timeline-acked.png"))

    # A stream of the source in outage: its current window is held, not bypassed.
    row(page, "stream", held).click()
    expect(page.locator("#timeline-selected")).to_have_text(held)
    expect(cell(page, "held")).to_have_count(1, timeout=WAIT_MS)
    assert cell(page, "bypassed").count() == 0
    expect(cell(page, "held")).to_have_attribute("title", re.compile(r"held since: "))

    # The lone failure: its windows bypassed, with their failures and the last error as text.
    row(page, "stream", lone).click()
    expect(page.locator("#timeline-selected")).to_have_text(lone)
    expect(cell(page, "bypassed").nth(1)).to_be_attached(timeout=WAIT_MS)
    bypassed = cell(page, "bypassed").first
    title = bypassed.get_attribute("title") or ""
    assert "failed attempts: " in title and "bypassed at: " in title, title
    assert f"last error: no_data: {HOSTILE_MESSAGE}" in title
    bypassed.hover()
    expect(page.locator("#timeline-detail")).to_contain_text(f"no_data: {HOSTILE_MESSAGE}")
    assert page.locator("#timeline b, #timeline img, #stream-rows b").count() == 0
    assert page.evaluate("window.__injected") is None
    expect(row(page, "stream", lone)).to_have_class(re.compile(r"\bselected\b"))

    assert page.evaluate("window.__firstLoad") == "still here"
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
    page.screenshot(path=str(OUTPUT / "dashboard-timeline.png"), full_page=True)
