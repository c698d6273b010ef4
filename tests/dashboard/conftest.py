"""The status page's browser: Debian's headless Chromium, driven by Playwright, for every
browser test of the page (the screenshots go to OUTPUT)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
# As root, on a closed network: no sandbox, no GPU, and none of Chromium's own connections.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
OUTPUT = Path(__file__).resolve().parents[2] / "test-output"


@pytest.fixture
def browser() -> Iterator[Browser]:
    """Headless Chromium from Debian (Playwright's own browser download is never used)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install-browser.sh (as root) first")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield chromium
        finally:
            chromium.close()
