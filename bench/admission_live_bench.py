"""Live windows beside backfill on a source of fixed capacity, with and without admission.

In-process over tests/coordinator/fakes.py, in simulated time (steps of 100 ms): `--live`
streams of 1 s windows, `--backfill` streams a day behind (1 min windows, 3 in flight each), one
source that serves `--capacity` tasks at once, each for `--hold-ms`; tasks beyond its capacity
queue at the source, first come first served (a query endpoint's queue). Printed for each mode:
the live windows' delay from their end to the source starting on them (p50, p99, max: the
coordinator's dispatch delay plus the queue at the source; every live window that ended in the
measured span counts, and one the source never started shows as ">run"), the backfill's rate
against its floor (slots; each slot turns over every hold plus a step or two here: the answer
is read at the next step, the slot refilled at the one after), and the fewest and most windows
any one backfill stream had answered (within a class, first come first served: an even spread).
Modes: no admission (every due window dispatched at once, as before issue 29), and a cap equal
to the capacity with `--backfill-share`.

    .venv/bin/python bench/admission_live_bench.py --live 100 --backfill 50 --capacity 40
"""

from __future__ import annotations

import argparse
import sys
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streams.core.admission import SourceLimits, backfill_floor
from tests.coordinator.fakes import T0, ack
from tests.coordinator.test_admission import gated, step

DAY_MS = 86_400_000
STEP_MS = 100


def run(args: argparse.Namespace, limited: bool) -> str:
    limits = (
        {"S": SourceLimits("S", max_in_flight=args.capacity, backfill_share=args.backfill_share)}
        if limited
        else {}
    )
    d = gated(limits)
    now_ms = T0 + DAY_MS
    for i in range(args.backfill):
        d.upsert(f"old-{i}", now_ms, source="S", start_ms=T0, window_ms=60_000, step_ms=1_000,
                 max_in_flight=3)  # fmt: skip
    for i in range(args.live):
        d.upsert(f"live-{i}", now_ms, source="S", start_ms=now_ms, window_ms=1_000, step_ms=1_000)
    queue: deque[dict[str, Any]] = deque()  # at the source, not started
    serving: list[tuple[int, dict[str, Any]]] = []  # (done_ms, task)
    seen = 0
    started: dict[tuple[str, int], int] = {}  # (live stream, window end) -> its start
    backfill_done = 0
    backfill_by = dict.fromkeys((f"old-{i}" for i in range(args.backfill)), 0)
    warm_ms = now_ms + 10_000
    end_ms = now_ms + args.seconds * 1000
    while now_ms < end_ms:
        now_ms += STEP_MS
        step(d, now_ms)
        tasks = d.tasks()
        queue.extend(tasks[seen:])
        seen = len(tasks)
        done = [t for at_ms, t in serving if at_ms <= now_ms]
        serving = [(at_ms, t) for at_ms, t in serving if at_ms > now_ms]
        while queue and len(serving) < args.capacity:
            task = queue.popleft()
            serving.append((now_ms + args.hold_ms, task))
            if task["stream_id"].startswith("live") and task["end_ms"] >= warm_ms:
                started.setdefault((task["stream_id"], task["end_ms"]), now_ms)
        for task in done:
            d.result(ack(task), now_ms)
            if task["stream_id"].startswith("old") and now_ms >= warm_ms:
                backfill_done += 1
                backfill_by[task["stream_id"]] += 1
    # Every live window that ended in the measured span (but its last 2 s) counts: one never
    # started at the source has waited longer than the run (">run"), and is not left out.
    due = [(f"live-{i}", at_ms) for i in range(args.live)
           for at_ms in range(warm_ms + 1000, end_ms - 2000, 1000)]  # fmt: skip
    never = 10**12
    delays = sorted(started[w] - w[1] if w in started else never for w in due)
    out = sum(1 for w in due if w in started)
    measured_s = (end_ms - warm_ms) / 1000
    floor = backfill_floor(args.backfill_share, args.capacity) if limited else 0

    def p(q: float) -> str:
        delay = delays[min(len(delays) - 1, int(len(delays) * q))]
        return ">run" if delay == never else str(delay)

    return (
        f"{'cap ' + str(args.capacity) if limited else 'none':>8} {out:5d}/{len(due):<5d}"
        f" {p(0.5):>7} {p(0.99):>7} {p(1.0):>7} {backfill_done / measured_s:10.1f}"
        f" {floor:11d} {min(backfill_by.values()):>6d}-{max(backfill_by.values())}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", type=int, default=100)
    parser.add_argument("--backfill", type=int, default=50)
    parser.add_argument("--capacity", type=int, default=40)
    parser.add_argument("--hold-ms", type=int, default=200)
    parser.add_argument("--backfill-share", type=float, default=0.2)
    parser.add_argument("--seconds", type=int, default=60)
    args = parser.parse_args()
    print(f"{args.live} live streams (1 s windows), {args.backfill} a day behind; the source "
          f"serves {args.capacity} at once, {args.hold_ms} ms each")  # fmt: skip
    print("   limit  live out/due  p50 ms  p99 ms  max ms  backfill/s  floor slots"
          "  per backfill stream")  # fmt: skip
    for limited in (False, True):
        print(run(args, limited))


if __name__ == "__main__":
    main()
