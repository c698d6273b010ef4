"""The window timeline in Debian's headless Chromium, over a fake read model and fake commits.

Every outcome at once, which a real cluster rarely shows together: a click on a stream row
selects it and shows its strip (one cell per window, a colour per outcome, a legend, hover
details), user text stays text, and a new window appears without a reload. The real-broker
version is tests/dashboard/test_timeline_browser.py. Screenshot: test-output/timeline-all.png.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from playwright.sync_api import Browser, Page, expect

from streams.core import CommittedWindow
from streams.dashboard.server import DashboardServer
from streams.dashboard.timeline import Recent
from tests.dashboard.conftest import OUTPUT
from tests.dashboard.fakes import FakeBypass, FakeReadModel, FakeStream

NOW = 1_795_950_000_000  # 2026-11-29T11:00:00Z
MIN = 60_000
START = NOW - 40 * MIN
HOSTILE = '<img src=x onerror="window.__injected = 1"> no data'
ERROR = {"kind": "no_data", "message": HOSTILE}
STREAM = "cluster-12345"


def committed() -> list[tuple[CommittedWindow, int]]:
    """36 windows from START: mostly acked, two partial acks (the next window starts where the
    ack stopped), two bypasses (the first replayed since), four acked after a hold."""
    found: list[tuple[CommittedWindow, int]] = []
    start = START
    for i in range(36):
        end = start + (MIN // 2 if i in (6, 21) else MIN)
        reason = "bypass" if i in (12, 13) else "ack"
        attempts, held_ms = (
            (14, (29 - i) * MIN) if 25 <= i <= 28 else (6 if i in (12, 13) else 1, None)
        )
        found.append((CommittedWindow(start, end, reason, attempts, held_ms), end + 250))  # type: ignore[arg-type]
        start = end
    replayed = found[12][0]
    found.append((CommittedWindow(replayed.start_ms, replayed.end_ms, "replayed", 1), NOW - MIN))
    return found


FRONTIER = committed()[35][0].end_ms  # where the current window starts
LISTED = committed()[13][0]  # the bypass still listed (the other one was replayed)


@dataclass
class FakeCommits:
    windows: list[tuple[CommittedWindow, int]] = field(default_factory=committed)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def recent(self, stream_id: str) -> Recent:
        with self.lock:
            found = tuple(self.windows) if stream_id == STREAM else ()
        return Recent(found, 3, 120_000, 125_000, 5_000, True, 5_000)

    def close(self) -> None:
        pass


@pytest.fixture
def dashboard() -> Iterator[tuple[DashboardServer, FakeReadModel, FakeCommits]]:
    config = {"window_ms": MIN, "end_ms": None}
    current = (FRONTIER, FRONTIER + MIN)
    model = FakeReadModel(
        views=[
            FakeStream(STREAM, downstream_ms=current[0], state_name="retrying", window=current,
                       attempt=9, last_error=ERROR, held_since_ms=NOW - 2 * MIN,
                       config=config),
            FakeStream("orders", downstream_ms=NOW - MIN, window=(NOW - MIN, NOW), attempt=1,
                       config=config),
        ],
        bypass_views=[
            FakeBypass(STREAM, LISTED.start_ms, LISTED.end_ms, attempts=5,
                       first_failed_ms=LISTED.end_ms, bypassed_ms=LISTED.end_ms + 5 * MIN,
                       last_error=ERROR),
        ],
    )  # fmt: skip
    commits = FakeCommits()
    server = DashboardServer(
        model=model, port=0, refresh_interval_s=0.2, clock=lambda: NOW, commits=commits
    )
    with server:
        assert model.refreshed.wait(5)
        yield server, model, commits


def cells(page: Page) -> list[str]:
    found: list[str] = page.locator("#timeline-strip .tl-cell").evaluate_all(
        "els => els.map(e => e.dataset.outcome)"
    )
    return found


def test_a_selected_streams_windows_show_as_a_strip_with_details(
    dashboard: tuple[DashboardServer, FakeReadModel, FakeCommits], browser: Browser
) -> None:
    server, model, commits = dashboard
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(server.url)
    expect(page.locator("#timeline-hint")).to_have_text(re.compile("Select a stream"))
    row = page.locator("#stream-rows tr").filter(has=page.get_by_text(STREAM, exact=True))
    row.click()
    expect(row).to_have_class(re.compile(r"\bselected\b"))
    expect(page.locator("#timeline-selected")).to_have_text(STREAM)
    strip = page.locator("#timeline-strip .tl-cell")
    expect(strip).to_have_count(37, timeout=10_000)
    # 32 acked (four after a hold), 2 partial, 1 bypassed (with what its listing adds), 1
    # replayed (after its bypass), and the current one, held.
    outcomes = cells(page)
    assert outcomes.count("acked") == 32 and outcomes.count("partial") == 2
    assert outcomes.count("bypassed") == 1 and outcomes.count("replayed") == 1
    assert outcomes[-1] == "held" and outcomes.count("held") == 1
    legend = page.locator("#timeline-legend")
    for label, count in [("acked", 32), ("partial ack", 2), ("bypassed", 1), ("held", 1)]:
        expect(legend.locator("li").filter(has_text=label).first).to_contain_text(str(count))
    assert page.locator("#timeline-strip .tl-was-held").count() == 4

    bypassed = page.locator('#timeline-strip .tl-cell[data-outcome="bypassed"]')
    title = bypassed.get_attribute("title") or ""
    assert "failed attempts: 5" in title and f"last error: no_data: {HOSTILE}" in title
    assert "bypassed at: 2026-11-29 10:38:30 UTC" in title
    bypassed.hover()
    detail = page.locator("#timeline-detail")
    expect(detail).to_contain_text("2026-11-29 10:32:30 \u2192 10:33:30 UTC")
    expect(detail).to_contain_text(f"last error: no_data: {HOSTILE}")
    page.locator('#timeline-strip .tl-cell[data-outcome="held"]').hover()
    expect(detail).to_contain_text("held (outage) (current window)")
    expect(detail).to_contain_text("attempts: 9")
    # User text stays text.
    assert page.locator("#timeline img, #timeline b").count() == 0
    assert page.evaluate("window.__injected") is None
    expect(page.locator("#timeline-note")).to_contain_text("records of commits partition 3")
    OUTPUT.mkdir(exist_ok=True)
    page.locator("#timeline-strip .tl-was-held").first.hover()
    page.screenshot(path=str(OUTPUT / "timeline-all.png"), full_page=True)

    # A new window arrives without a reload; the selection survives the table's redraws.
    with commits.lock:
        commits.windows.append((CommittedWindow(FRONTIER, FRONTIER + MIN, "ack", 10), NOW))
    model.views[0] = FakeStream(STREAM, downstream_ms=FRONTIER + MIN, attempt=1,
                                window=(FRONTIER + MIN, FRONTIER + 2 * MIN),
                                config={"window_ms": MIN})  # fmt: skip
    expect(strip.last).to_have_attribute("data-outcome", "open", timeout=10_000)
    expect(strip).to_have_count(38)
    expect(row).to_have_class(re.compile(r"\bselected\b"))
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1

    # Another stream; and the selection is in the address, so a reload keeps it.
    page.locator("#stream-rows tr").filter(has=page.get_by_text("orders", exact=True)).click()
    expect(page.locator("#timeline-selected")).to_have_text("orders")
    expect(strip).to_have_count(1)
    expect(strip.first).to_have_attribute("data-outcome", "open")
    page.reload()
    expect(page.locator("#timeline-selected")).to_have_text("orders")
    expect(strip).to_have_count(1)
