"""The status page in a real browser: Debian's headless Chromium, driven by Playwright.

A real broker and coordinator, a stand-in worker that acks one stream and nacks another until
it is bypassed, the DashboardServer in-process; the page must show both streams with their
lag, the bypass with its replay command, escape user text, update without a reload, and list
the healthy stream's source in the Sources panel.
The screenshot goes to test-output/dashboard.png. Then, over a fake read model of 1,234
streams (no broker), the table's server-side pages, sorts and debounced search.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from streams.dashboard.server import DashboardServer
from streams.kafka.settings import KafkaSettings
from tests.dashboard.conftest import OUTPUT
from tests.dashboard.fakes import FakeReadModel, FakeStream
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Feed, Responder

FAST = {
    "bypass_after_ms": 3000,
    "retry": {"strategy": "fixed", "interval_ms": 500},
    "task_timeout_ms": 1000,
}
WAIT_MS = 30_000
# A nack message that would run script if the page ever rendered it as HTML.
HOSTILE_MESSAGE = '<img src=x onerror="window.__injected = 1"> upstream returned nothing'


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def row(page: Page, table: str, stream_id: str) -> Locator:
    """The rows of `#{table}-rows` whose stream cell is exactly `stream_id`."""
    return page.locator(f"#{table}-rows tr").filter(has=page.get_by_text(stream_id, exact=True))


@pytest.mark.broker
def test_the_status_page_in_a_real_browser(
    kafka: KafkaSettings, unique: str, tmp_path: Path, browser: Browser
) -> None:
    prefix = f"tm-{unique}"
    healthy, failing = f"orders-{unique}", f"<b>flaky</b>-{unique}"

    def worker(task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if task["stream_id"] == healthy:
            return "ack", {"ack_ms": task["end_ms"]}
        return "nack", {"error": {"kind": "no_data", "message": HOSTILE_MESSAGE}}

    coordinator = CoordinatorProcess(kafka, prefix, tmp_path / "data", tmp_path / "coord.log")
    coordinator.start()
    try:
        coordinator.wait_ready()
        feed = Feed(kafka, prefix)
        now = now_ms()
        # Healthy: 2 s windows every second, so its downstream time moves while we watch.
        feed.upsert(healthy, now - now % 1000 - 10_000, window_ms=2000, step_ms=1000,
                    source=f"db-{unique}", **FAST)  # fmt: skip
        # Failing: one-minute windows from 5 minutes ago, every attempt nacked until bypassed.
        feed.upsert(failing, now - now % 60_000 - 300_000, **FAST)
        with (
            Responder(kafka, prefix, f"worker-{unique}", worker),
            DashboardServer(kafka, prefix, port=0) as dashboard,
        ):
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            check_the_page(page, dashboard.url, healthy, failing)
            # Its source, from the coordinator's `health` entries, in the Sources panel.
            source = row(page, "source", f"db-{unique}")
            expect(source.locator("td").nth(2)).to_have_text("none", timeout=WAIT_MS)
            expect(source.locator("svg.src-chart")).to_be_attached()
    finally:
        coordinator.stop()


def check_the_page(page: Page, url: str, healthy: str, failing: str) -> None:
    page.goto(url)
    page.evaluate("window.__firstLoad = 'still here'")
    expect(page).to_have_title("Tidemark status")

    # Both streams, each with a lag and a state badge.
    ok_row, bad_row = row(page, "stream", healthy), row(page, "stream", failing)
    expect(ok_row).to_have_count(1, timeout=WAIT_MS)
    expect(bad_row).to_have_count(1, timeout=WAIT_MS)
    expect(ok_row.locator("td.lag")).to_have_text(re.compile(r"^\d+s$"), timeout=WAIT_MS)
    expect(ok_row.locator(".badge")).to_have_text("live", timeout=WAIT_MS)
    # Minutes behind: it started 5 windows ago and only moves by bypassing one at a time.
    expect(bad_row.locator("td.lag")).to_have_text(re.compile(r"^\dm \d+s$"))

    # The failing stream's window is bypassed; the replay command is listed and copyable.
    bypass = row(page, "bypass", failing).first
    expect(bypass).to_be_visible(timeout=WAIT_MS)
    command = bypass.locator("code")
    expect(command).to_contain_text(f"tidemark replay '{failing}' --from ")
    expect(bypass.locator("td.error")).to_have_text(f"no_data: {HOSTILE_MESSAGE}")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    bypass.get_by_role("button", name="Copy").click()
    expect(bypass.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == command.text_content()

    # User text stays text: no element or script came out of a stream id or an error message.
    assert page.locator("#stream-rows b, #bypass-rows b, main img").count() == 0
    assert page.evaluate("window.__injected") is None

    # Sorted by lag, largest first; a click on the header reverses it (on the server).
    wait_for_ids(page, [failing, healthy])
    page.get_by_role("button", name="Lag").click()
    wait_for_ids(page, [healthy, failing])
    page.get_by_role("button", name="Lag").click()
    wait_for_ids(page, [failing, healthy])

    # A search by stream id leaves one row, and clearing it brings both back.
    page.get_by_role("searchbox").fill("flaky")
    wait_for_ids(page, [failing])
    page.get_by_role("searchbox").fill("")
    wait_for_ids(page, [failing, healthy])

    # It updates in place: new data arrives while the first load's marker survives.
    refreshed = page.locator("#refreshed").text_content()
    downstream = ok_row.locator("td").nth(1).text_content()
    expect(page.locator("#refreshed")).not_to_have_text(refreshed or "", timeout=WAIT_MS)
    expect(ok_row.locator("td").nth(1)).not_to_have_text(downstream or "", timeout=WAIT_MS)
    expect(page.locator("#age")).to_have_text(re.compile(r"^updated \d+ s ago$"))
    assert page.evaluate("window.__firstLoad") == "still here"
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
    assert int(page.locator("body").get_attribute("data-updates") or 0) >= 2

    OUTPUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUTPUT / "dashboard.png"), full_page=True)


def wait_for_ids(page: Page, expected: list[str]) -> None:
    """Wait until the streams table shows exactly these stream ids, in this order."""
    page.wait_for_function(
        """expected => JSON.stringify([...document.querySelectorAll("#stream-rows tr")]
                        .map(e => e.dataset.streamId)) === JSON.stringify(expected)""",
        arg=expected,
        timeout=WAIT_MS,
    )


NOW = 1_800_000_000_000


def test_the_table_pages_sorts_and_searches_on_the_server(browser: Browser) -> None:
    views = [FakeStream(f"cluster-{i:04d}", downstream_ms=NOW - i * 1000) for i in range(1234)]
    views.append(FakeStream("<b>bold</b>", downstream_ms=NOW))
    model = FakeReadModel(views=views)
    asked: list[str] = []
    with DashboardServer(model=model, port=0, refresh_interval_s=0.2, clock=lambda: NOW) as server:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.on("request", lambda request: asked.append(request.url))
        page.goto(server.url)
        pager_text = page.locator("#stream-range")
        expect(pager_text).to_have_text("1\u201350 of 1,235", timeout=WAIT_MS)
        expect(page.locator("#counts")).to_contain_text("1,235 streams")
        assert page.locator("#stream-rows tr").count() == 50  # one page in the DOM, not all
        wait_for_ids(page, [f"cluster-{i:04d}" for i in range(1233, 1183, -1)])

        # The next page, which later refreshes keep.
        page.get_by_role("button", name="Next page").click()
        expect(pager_text).to_have_text("51\u2013100 of 1,235")
        wait_for_ids(page, [f"cluster-{i:04d}" for i in range(1183, 1133, -1)])
        updates = int(page.locator("#streams").get_attribute("data-updates") or 0)
        page.wait_for_function(
            f"() => Number(document.getElementById('streams').dataset.updates) > {updates + 1}"
        )
        expect(pager_text).to_have_text("51\u2013100 of 1,235")

        # By stream id, A to Z, from the first page; then the last page.
        page.get_by_role("button", name="Stream", exact=True).click()
        expect(page.locator("th[data-key=stream_id]")).to_have_attribute("aria-sort", "ascending")
        wait_for_ids(page, ["<b>bold</b>", *(f"cluster-{i:04d}" for i in range(49))])
        page.get_by_role("button", name="Last page").click()
        expect(pager_text).to_have_text("1,201\u20131,235 of 1,235")
        expect(page.get_by_role("button", name="Next page")).to_be_disabled()

        # A search, typed key by key: one request for what was typed, not one per key.
        page.get_by_role("searchbox").press_sequentially("cluster-12", delay=40)
        expect(pager_text).to_have_text(
            "1\u201334 of 34 matching \u201ccluster-12\u201d (1,235 streams)", timeout=WAIT_MS
        )
        wait_for_ids(page, [f"cluster-{i:04d}" for i in range(1200, 1234)])
        searched = {parse_qs(urlsplit(u).query).get("q", [""])[0] for u in asked}
        assert searched - {""} == {"cluster-12"}

        # User text in the search and in stream ids stays text.
        page.get_by_role("searchbox").fill("<b>")
        wait_for_ids(page, ["<b>bold</b>"])
        page.get_by_role("searchbox").fill("<img src=x>")
        expect(page.locator("#stream-rows td.empty")).to_have_text(
            "No stream id contains \u201c<img src=x>\u201d."
        )
        assert page.locator("#stream-rows b, #stream-rows img").count() == 0

        # A reload keeps the search and the sort (in the #fragment).
        page.get_by_role("searchbox").fill("cluster-000")
        wait_for_ids(page, [f"cluster-{i:04d}" for i in range(10)])
        page.reload()
        expect(page.get_by_role("searchbox")).to_have_value("cluster-000")
        wait_for_ids(page, [f"cluster-{i:04d}" for i in range(10)])

        # Selecting a stream for its timeline keeps the table's keys in the #fragment, and back.
        row(page, "stream", "cluster-0003").click()
        page.wait_for_function("() => location.hash.includes('stream=cluster-0003')")
        assert parse_qs(page.evaluate("location.hash.slice(1)"))["q"] == ["cluster-000"]
        page.get_by_role("button", name="Lag").click()
        page.wait_for_function("() => location.hash.includes('sort=lag_ms')")
        assert "stream=cluster-0003" in page.evaluate("location.hash")
        OUTPUT.mkdir(exist_ok=True)
        page.screenshot(path=str(OUTPUT / "dashboard-search.png"), full_page=True)
