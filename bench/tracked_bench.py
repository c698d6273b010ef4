"""What the coordinator's metrics hold per owned stream, and what a scrape of them costs.

    .venv/bin/python bench/tracked_bench.py [--streams 100000]

`streams` streams (one-minute windows, each with one window due, 24 partitions) are decided
once and handed to `CoordinatorMetrics.track`, as a rebuild does, and dropped: what stays is
what the metrics keep. tracemalloc counts the bytes allocated and still held after a full
collection, per stream, the stream ids' strings left out (made before the count starts; the
coordinator holds them elsewhere too). Then each registered collector is timed once in wall
time (a scrape runs them all).
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

from streams.coordinator.telemetry.metrics import CoordinatorMetrics
from streams.core import config_from_dict
from streams.core.lifecycle import create_state

NOW_MS = 1_800_000_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=100_000)
    args = parser.parse_args()
    ids = [f"stream-{i:07d}" for i in range(args.streams)]
    metrics = CoordinatorMetrics(clock_ms=lambda: NOW_MS)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i, stream_id in enumerate(ids):
        config = config_from_dict({
            "stream_id": stream_id, "start_ms": NOW_MS - 3_600_000 - (i % 100) * 60_000,
            "window_ms": 60_000, "step_ms": 15_000,
        })  # fmt: skip
        metrics.track(i % 24, create_state(config, NOW_MS).state)
    del config
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    print(f"{args.streams:,} streams: {held / args.streams:.0f} bytes a stream held by the metrics")
    for collector in list(metrics.registry._collector_to_names):
        began = time.perf_counter()
        list(collector.collect())
        took_ms = (time.perf_counter() - began) * 1000
        print(f"  a scrape of {type(collector).__name__}: {took_ms:.0f} ms")


if __name__ == "__main__":
    main()
