"""The status page's first render over populated topics (a phase of scale_bench.py).

`tidemark dashboard` is started as a process of its own over the cluster's `streams` and
`bypassed` topics, and timed from its start:
  - to the first `/api/streams` page with rows (its first refresh published);
  - to `/api/streams` counting every stream, its read model caught up;
  - headless Chromium (Debian's, as the browser tests use), opened on the page at the start
    and reloaded while the server is not listening yet: to the first rows on screen, and to
    the pager counting every stream;
then, with everything read, single `/api/streams` requests (a sort's first request builds its
order; a search's first request scans every id), `/api/state`, and the server's RSS.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from streams.dev.broker import free_port

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update"]  # fmt: skip


def _get(url: str, timeout_s: float = 60) -> tuple[int, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def _rss(pid: int) -> str:
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0]) / 1024
    return f"{fields['VmRSS']:,.0f} MiB (peak {fields['VmHWM']:,.0f} MiB)"


class _Browser:
    """Chromium on a thread of its own (Playwright's sync API stays in one thread)."""

    def __init__(self, url: str, total: int, timeout_s: float, began: float) -> None:
        self.url, self.total, self.timeout_s, self.began = url, total, timeout_s, began
        self.first_rows: float | None = None
        self.all_counted: float | None = None
        self.error: str | None = None
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="chromium", daemon=True)

    def _run(self) -> None:
        try:
            from playwright.sync_api import sync_playwright

            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
                )
                try:
                    page = browser.new_page(viewport={"width": 1440, "height": 900})
                    self.ready.set()
                    self._watch(page)
                finally:
                    browser.close()
        except Exception as exc:  # reported in the figures, the rest of the bench goes on
            self.error = f"{type(exc).__name__}: {exc}"[:300]
        finally:
            self.ready.set()

    def _watch(self, page: Any) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:  # the server may not listen yet
            try:
                page.goto(self.url, timeout=10_000)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        timeout_ms = max(1.0, deadline - time.monotonic()) * 1000
        page.wait_for_selector("#stream-rows tr[data-stream-id]", timeout=timeout_ms)
        self.first_rows = time.monotonic() - self.began
        total = f"{self.total:,}"
        page.wait_for_function(
            "total => document.getElementById('stream-range').textContent.endsWith(' of ' + total)",
            arg=total,
            timeout=max(1.0, deadline - time.monotonic()) * 1000,
        )
        self.all_counted = time.monotonic() - self.began


def status_page(env: dict[str, str], prefix: str, total: int, timeout_s: float,
                log: Path, browser: bool = True) -> dict[str, str]:  # fmt: skip
    """Start the status page, time its first render and its requests; stop it."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    out: dict[str, str] = {}
    watcher: _Browser | None = None
    if browser and CHROMIUM.exists():
        watcher = _Browser(base + "/", total, timeout_s, 0.0)
        watcher.thread.start()
        watcher.ready.wait(60)  # Chromium is up before the clock starts
    began = time.monotonic()
    if watcher is not None:
        watcher.began = began
    with log.open("wb") as sink:
        dashboard = subprocess.Popen(
            [sys.executable, "-m", "streams", "dashboard", "--port", str(port),
             "--prefix", prefix],
            env=env, stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        first: float | None = None
        deadline = began + timeout_s
        while True:
            if dashboard.poll() is not None:
                raise RuntimeError(f"the dashboard exited with {dashboard.returncode}; see {log}")
            answer = _get(f"{base}/api/streams?limit=50")
            if answer is not None and answer[0] == 200:
                doc = answer[1]
                if first is None and doc["refreshed_ms"] is not None and doc["streams"]:
                    first = time.monotonic() - began
                    out["status page: start -> first page of /api/streams"] = (
                        f"{first:,.1f} s ({doc['total']:,} streams read by then)"
                    )
                    print(f"  status page: first page after {first:,.1f} s", flush=True)
                if doc["total"] >= total and doc["caught_up"]:
                    took = time.monotonic() - began
                    out["status page: start -> every stream counted"] = f"{took:,.1f} s"
                    print(f"  status page: all {total:,} after {took:,.1f} s", flush=True)
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the status page did not count {total:,} within {timeout_s} s")
            time.sleep(0.1)
        if watcher is not None:
            watcher.thread.join(timeout_s)
            if watcher.first_rows is not None:
                out["status page in Chromium: start -> first rows shown"] = (
                    f"{watcher.first_rows:,.1f} s"
                )
            if watcher.all_counted is not None:
                out["status page in Chromium: start -> pager counts every stream"] = (
                    f"{watcher.all_counted:,.1f} s"
                )
            if watcher.error:
                out["status page in Chromium"] = f"failed: {watcher.error}"
        for query in [
            "limit=50",
            f"sort=stream_id&order=asc&offset={total // 2}",
            "sort=state&order=asc",
            "sort=attempt&order=desc",
            "sort=attempt&order=desc&offset=100",
            "q=scale-01234",
            "q=scale-01234&offset=50",
            f"q=scale-&sort=lag_ms&order=asc&offset={total // 2}",
        ]:
            t0 = time.monotonic()
            answer = _get(f"{base}/api/streams?{query}")
            took = time.monotonic() - t0
            matching = answer[1].get("matching") if answer and answer[0] == 200 else answer
            out[f"/api/streams?{query}"] = f"{took * 1000:,.0f} ms ({matching:,} matching)"
        t0 = time.monotonic()
        _get(f"{base}/api/state")
        out["/api/state"] = f"{(time.monotonic() - t0) * 1000:,.0f} ms"
        out["status page RSS, every stream read"] = _rss(dashboard.pid)
        return out
    finally:
        dashboard.terminate()
        try:
            dashboard.wait(30)
        except subprocess.TimeoutExpired:
            dashboard.kill()
            dashboard.wait(10)
