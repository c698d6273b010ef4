"""The status page's refresher and requests in-process, at many streams: no Kafka at all.

    .venv/bin/python bench/dashboard_bench.py [--streams 100000] [--changes 1000,17000]
        [--previous] [--profile]

A `ReadModel` gets `--streams` views through `apply` (as its refresh would, decoding each
one), then the status page's refresher path runs over it: the first read (every stream into
the table) and refreshes after `--changes` views changed (new `downstream_ms`; 17,000 is a
second of a million one-minute streams). Then `/api/streams` and `/api/state` requests are
timed (`streams_response` and `state_document`, rendering the JSON included), each twice: a
first request of a sort builds its order, a first search scans every id. `--previous` also
times what the refresher did before the table (every view copied and every stream rendered
and sorted by lag on each refresh and request), with Python's default GC thresholds as it ran;
what follows runs with the dashboard's (server.serve). Times are wall time of this process
(single thread). RSS is this process's VmRSS.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import gc
import json
import os
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common import own_rss_mib  # noqa: E402

from streams.dashboard import api  # noqa: E402
from streams.dashboard.state import Snapshot, state_document  # noqa: E402
from streams.dashboard.table import StreamTable  # noqa: E402
from streams.kafka.settings import KafkaSettings  # noqa: E402
from streams.readmodel import ReadModel  # noqa: E402

NOW_MS = 1_798_500_000_000 - 1_798_500_000_000 % 60_000
CONFIG = {
    "window_ms": 60_000,
    "step_ms": 15_000,
    "delay_ms": 3_600_000,
    "task_timeout_ms": 60_000,
    "bypass_after_ms": 300_000,
    "retry": {"strategy": "fixed", "interval_ms": 60_000},
    "max_attempts": None,
    "non_retryable": [],
    "max_in_flight": 1,
    "params": {},
}


def view(i: int, downstream_ms: int) -> bytes:
    """Stream i's view as the coordinator publishes it; every 50th is retrying."""
    sid = f"scale-{i:07d}"
    return orjson.dumps(
        {
            "stream_id": sid,
            "config": {"stream_id": sid, "start_ms": NOW_MS, **CONFIG},
            "status": "retrying" if i % 50 == 0 else "live",
            "downstream_ms": downstream_ms,
            "window": {"start_ms": downstream_ms, "end_ms": downstream_ms + 60_000},
            "attempt": 1 + i % 3,
            "last_error": {"kind": "no_data", "message": "empty"} if i % 50 == 0 else None,
            "bypasses": 0,
            "committed_ms": None,
            "incarnation": 7,
            "changed_ms": NOW_MS,
        }
    )


def timed(what: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter()
    result = what()
    return time.perf_counter() - began, result


def previous_refresh(model: ReadModel, now_ms: int) -> dict[str, Any]:
    """What the refresher and each /api/state request did before the table (a417bed)."""
    streams = tuple(copy.copy(s) for s in model.streams())  # Snapshot.of, every refresh
    rows = [s.to_json(now_ms) for s in streams]  # state_document, per request
    rows.sort(key=lambda s: (s["lag_ms"] is None, -(s["lag_ms"] or 0), s["stream_id"]))
    return {"streams": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=100_000)
    parser.add_argument("--changes", default="1000,17000")
    parser.add_argument("--previous", action="store_true")
    parser.add_argument("--profile", action="store_true", help="cProfile of the first read")
    args = parser.parse_args()
    n = args.streams
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; {n:,} streams", flush=True)  # fmt: skip
    model = ReadModel(KafkaSettings("127.0.0.1:1"), "bench")
    rss0 = own_rss_mib()
    took, _ = timed(
        lambda: [
            model.apply("streams", f"scale-{i:07d}".encode(), view(i, NOW_MS - (i % 600) * 1000))
            for i in range(n)
        ]
    )
    rss_model = own_rss_mib()
    figures: list[tuple[str, str]] = []
    figures.append(("read model: apply (decode) every view", f"{took:,.1f} s"))
    figures.append(("RSS of the read model's views", f"{rss_model - rss0:,.0f} MiB"))
    print(figures[-2:], flush=True)

    if args.previous:
        took, doc = timed(lambda: previous_refresh(model, NOW_MS))
        size = len(json.dumps(doc, separators=(",", ":")))
        figures.append(
            ("before: a refresh + one /api/state (every stream)", f"{took:,.2f} s, {size:,} B")
        )
        print(figures[-1], flush=True)
        del doc
        gc.collect()

    gc.set_threshold(50_000, 20, 100)  # as `tidemark dashboard` runs (server.serve)
    table = StreamTable()
    profile = cProfile.Profile() if args.profile else None
    if profile is not None:
        profile.enable()
    took, snapshot = timed(lambda: Snapshot.read(model, table, NOW_MS))
    if profile is not None:
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(20)
    figures.append(("first read: every view into the table", f"{took:,.2f} s"))
    figures.append(("RSS of the table", f"{own_rss_mib() - rss_model:,.0f} MiB"))
    print(figures[-2:], flush=True)
    took, _ = timed(lambda: Snapshot.read(model, table, NOW_MS + 1000))
    figures.append(("a refresh with nothing changed", f"{took * 1000:,.1f} ms"))

    for changes in (int(c) for c in args.changes.split(",")):
        runs = []
        for r in range(3):
            now = NOW_MS + (r + 2) * 1000
            for i in range(changes):
                j = (i * 7919 + r) % n
                model.apply("streams", f"scale-{j:07d}".encode(), view(j, now - (i % 300) * 1000))
            took, snapshot = timed(lambda now=now: Snapshot.read(model, table, now))
            runs.append(took)
        median_ms = statistics.median(runs) * 1000
        figures.append((f"a refresh after {changes:,} views changed", f"{median_ms:,.0f} ms"))
        print(figures[-1], flush=True)

    now = NOW_MS + 10_000
    queries = [
        "",  # the page's first request
        "sort=lag_ms&order=desc&offset=50",
        f"sort=stream_id&order=asc&offset={n // 2}",
        "sort=state&order=asc",
        f"sort=downstream_ms&order=desc&offset={n - 50}",
        "sort=attempt&order=desc",
        "sort=last_error&order=asc",
        "q=scale-00123",
        "q=scale-0012&sort=stream_id",
        "q=5&sort=lag_ms",
        f"q=scale-&sort=attempt&offset={n // 2}",
    ]
    for query in queries:
        first, (status, doc) = timed(lambda q=query: api.streams_response(snapshot, q, now))
        assert status == 200, doc
        again, _ = timed(lambda q=query: api.streams_response(snapshot, q, now))
        matching = doc["matching"]
        figures.append(
            (f"/api/streams?{query or '(defaults)'}",
             f"{first * 1000:,.1f} ms, again {again * 1000:,.1f} ms ({matching:,} matching)")
        )  # fmt: skip
        print(figures[-1], flush=True)
    took, doc = timed(lambda: state_document(snapshot, now))
    size = len(json.dumps(doc, separators=(",", ":")))
    figures.append(("/api/state", f"{took * 1000:,.1f} ms, {size:,} B"))
    figures.append(("RSS at the end", f"{own_rss_mib():,.0f} MiB"))

    print(f"\n{n:,} streams\n\n| figure | result |\n|---|---|")
    for name, value in figures:
        print(f"| {name} | {value} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
