"""The cost of a tick against the number of streams: the Processor in-process, no Kafka.

    .venv/bin/python bench/tick_bench.py [--totals 10000,100000,1000000] [--due 500]
        [--ticks 15] [--profile] [--parts]

For each total, a transactional Processor (the confluent engine's mode, over
tests/coordinator/fakes.py, the engine's GC threshold) gets `total` streams by upsert. Of them,
`due * ticks` are active: one-minute windows whose ends are staggered so that exactly `due`
come due at each of `ticks` ticks, one second apart; all the others have `delay_ms` one hour,
so none of them is due during the run (as in scale_bench.py). Each tick is timed in CPU time
of this process: `partitions_to_tick`, `on_tick` of every partition it names, and the
checkpoint that commits the transaction (encoding the dispatched streams' records). The tasks
are not answered (their deadlines are a minute away). O(due) means the time per due stream
stays the same as the total grows. Then 5 more ticks run under cProfile, only to count the
Python calls per due stream: a figure that other loads on the machine do not move. `--parts`
also times, per due stream, `on_tick`, the due-index's `pop_due` and `set` inside it, and the
checkpoint, to tell which part grows with the total.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import platform
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common import own_rss_mib  # noqa: E402

from streams.coordinator import index  # noqa: E402
from streams.coordinator.confluent.engine import GC_THRESHOLD  # noqa: E402
from tests.coordinator.fakes import Driver  # noqa: E402

NOW_MS = 1_798_500_000_000 - 1_798_500_000_000 % 60_000  # a fixed clock, on a minute
WINDOW_MS = 60_000
HOUR_MS = 3_600_000


PARTS = {"on_tick": 0.0, "pop_due": 0.0, "set": 0.0, "checkpoint": 0.0}


def time_the_index() -> None:
    """Add the CPU time of DueIndex.pop_due and DueIndex.set to PARTS (--parts)."""
    for name in ("pop_due", "set"):
        method = getattr(index.DueIndex, name)

        def timed(self: Any, *args: Any, _method: Any = method, _name: str = name) -> Any:
            began = time.process_time()
            try:
                return _method(self, *args)
            finally:
                PARTS[_name] += time.process_time() - began

        setattr(index.DueIndex, name, timed)


def register(d: Any, total: int, active: int, due: int) -> float:
    """Upsert every stream (untimed by the figures); returns the seconds it took."""
    p, topic = d.processor, d.topics.control
    began = time.monotonic()
    for i in range(total):
        sid = f"s-{i:07d}"
        if i < active:  # its first window ends at the tick number i // due + 1
            start = NOW_MS - WINDOW_MS + (i // due + 1) * 1000
            doc = {"type": "upsert", "stream_id": sid, "start_ms": start,
                   "window_ms": WINDOW_MS, "step_ms": 1000}  # fmt: skip
        else:
            doc = {"type": "upsert", "stream_id": sid, "start_ms": NOW_MS,
                   "window_ms": WINDOW_MS, "step_ms": 1000, "delay_ms": HOUR_MS}  # fmt: skip
        key = sid.encode()
        p.on_message(topic, d.partition(sid), i, key, orjson.dumps(doc), NOW_MS)
        if i % 10_000 == 9_999:
            p.checkpoint(NOW_MS)
            d.emitter.sent = []
    p.checkpoint(NOW_MS)
    d.emitter.sent = []
    return time.monotonic() - began


COUNTED_TICKS = 5  # after the timed ones, under cProfile: Python calls per due stream


def run(total: int, due: int, ticks: int, profile: cProfile.Profile | None) -> dict[str, Any]:
    gc.collect()
    active = min(total, due * (ticks + COUNTED_TICKS))
    d = Driver(flush_ms=200, transactional=True, checkpoint_each=False)
    p = d.processor
    p.on_assigned(range(d.partitions))
    for partition in range(d.partitions):
        p.on_caught_up(partition)
    registered_s = register(d, total, active, due)
    p_tick = p.partitions_to_tick
    # One tick at the registration time first (nothing is due yet): it settles the index.
    for partition in p_tick(NOW_MS):
        p.on_tick(partition, NOW_MS)
    p.checkpoint(NOW_MS)
    d.emitter.sent = []
    times, dispatched = [], []
    tasks = d.topics.tasks
    for part in PARTS:
        PARTS[part] = 0.0
    for n in range(1, ticks + 1):
        now = NOW_MS + n * 1000
        if profile is not None:
            profile.enable()
        began = time.process_time()
        for partition in p_tick(now):
            p.on_tick(partition, now)
        ticked = time.process_time()
        p.checkpoint(now)
        took = time.process_time() - began
        PARTS["on_tick"] += ticked - began
        PARTS["checkpoint"] += took - (ticked - began)
        if profile is not None:
            profile.disable()
        times.append(took)
        dispatched.append(sum(1 for s in d.emitter.sent if s.topic == tasks))
        d.emitter.sent = []
    counter = cProfile.Profile()  # the calls are the same on a busy machine as on a quiet one
    for n in range(ticks + 1, ticks + COUNTED_TICKS + 1):
        now = NOW_MS + n * 1000
        counter.enable()
        for partition in p_tick(now):
            p.on_tick(partition, now)
        p.checkpoint(now)
        counter.disable()
        d.emitter.sent = []
    calls = sum(stat[1] for stat in pstats.Stats(counter).stats.values())  # type: ignore[attr-defined]
    per_tick = statistics.median(times)
    due_each = max(statistics.median(dispatched), 1)
    return {
        "total": total,
        "due": statistics.median(dispatched),
        "dispatched": dispatched,
        "registered_s": registered_s,
        "tick_ms": per_tick * 1000,
        "tick_min_ms": min(times) * 1000,
        "tick_max_ms": max(times) * 1000,
        "per_due_us": per_tick / due_each * 1e6,
        "per_due_min_us": min(times) / due_each * 1e6,
        "calls_per_due": calls / (COUNTED_TICKS * due_each),
        "parts": {k: v / (ticks * due_each) * 1e6 for k, v in PARTS.items()},
        "rss_mib": own_rss_mib(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--totals", default="10000,100000,1000000")
    parser.add_argument("--due", type=int, default=500, help="streams due at each tick")
    parser.add_argument("--ticks", type=int, default=15)
    parser.add_argument("--profile", action="store_true", help="cProfile of the timed ticks")
    parser.add_argument("--parts", action="store_true", help="time the parts of a tick too")
    args = parser.parse_args()
    if args.parts:
        time_the_index()
    gc.set_threshold(GC_THRESHOLD, 20, 100)  # as the confluent engine runs
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; due per tick {args.due}, {args.ticks} ticks",
        flush=True,
    )
    print("| total streams | due per tick | tick: median (min, max) | per due stream: median "
          "(min) | Python calls per due stream | RSS |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for total in (int(t) for t in args.totals.split(",")):
        profile = cProfile.Profile() if args.profile else None
        r = run(total, args.due, args.ticks, profile)
        bad = [n for n in r["dispatched"] if n != args.due]
        print(
            f"| {total:,} | {r['due']:,.0f} | {r['tick_ms']:.1f} ms ({r['tick_min_ms']:.1f}, "
            f"{r['tick_max_ms']:.1f}) | {r['per_due_us']:.1f} µs ({r['per_due_min_us']:.1f}) "
            f"| {r['calls_per_due']:.1f} | {r['rss_mib']:,.0f} MiB |"
            + (f" (ticks dispatching other than {args.due}: {bad})" if bad else "")
            + f"  [registered in {r['registered_s']:.1f} s]",
            flush=True,
        )
        if args.parts:
            parts = r["parts"]
            print(f"  per due stream: on_tick {parts['on_tick']:.1f} µs (of which the due-index's "
                  f"pop_due {parts['pop_due']:.1f}, set {parts['set']:.1f}), checkpoint "
                  f"{parts['checkpoint']:.1f} µs", flush=True)  # fmt: skip
        if profile is not None:
            pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
