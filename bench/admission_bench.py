"""Micro-benchmark of the pure admission core: admission decisions per second on one core.

Run: .venv/bin/python bench/admission_bench.py [--decisions 1000000]

Scenarios (each decision is one `SourceGate.admit` call; an admitted task is answered once the
gate is full, oldest first, so that the counts keep moving):
- unlimited: a source without limits and no recovery (what every source costs today).
- limited: max_in_flight 20, rate_per_s 5000 (burst 5000), backfill_share 0.2; a mix of 60 %
  LIVE, 30 % CATCHUP, 10 % REPLAY windows, with windows of every class waiting; time moves 1 ms
  every 10 decisions, so the bucket and the cap both deny some.
- paced: the same limits, in a recovery (slow start from 4, a failure every 50 answers).
- share: `allocate` over 64 partitions (once per publish, not per dispatch; for scale).
Prints figures only; nothing is asserted on time.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections import deque

from streams.core.admission import (
    CATCHUP,
    LIVE,
    REPLAY,
    Class,
    SourceGate,
    SourceLimits,
    allocate,
)

NOW_MS = 1_795_946_400_000  # 2026-11-29T10:00:00Z
LIMITED = SourceLimits("thanos", max_in_flight=20, rate_per_s=5000, backfill_share=0.2)


def _mix(count: int) -> list[Class]:
    rnd = random.Random(29)
    return rnd.choices([LIVE, CATCHUP, REPLAY], weights=[6, 3, 1], k=count)


def _run(gate: SourceGate, classes: list[Class], fail_every: int = 0) -> tuple[int, int, float]:
    flying: deque[Class] = deque()
    cap = gate.cap()
    full = 1_000 if cap is None else cap
    admitted = answers = 0
    now_ms = NOW_MS
    admit, answered = gate.admit, gate.answered
    started = time.perf_counter()
    for i, klass in enumerate(classes):
        if not i % 10:
            now_ms += 1
        if admit(klass, now_ms):
            admitted += 1
            flying.append(klass)
        if len(flying) >= full or (len(flying) and not i % 7):
            answers += 1
            answered(flying.popleft(), not fail_every or answers % fail_every != 0)
    return admitted, len(classes), time.perf_counter() - started


def _waiting(gate: SourceGate) -> SourceGate:
    for klass, count in ((LIVE, 5), (CATCHUP, 200), (REPLAY, 100)):
        gate.waiting(klass, count)
    return gate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=1_000_000)
    args = parser.parse_args()
    classes = _mix(args.decisions)
    print(f"{args.decisions:,} admission decisions per scenario, one core")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    paced = _waiting(SourceGate(LIMITED, NOW_MS))
    paced.start_recovery(NOW_MS)
    scenarios = [
        ("unlimited", SourceGate(SourceLimits.unlimited("thanos"), NOW_MS), 0),
        ("limited", _waiting(SourceGate(LIMITED, NOW_MS)), 0),
        ("paced", paced, 50),
    ]
    for name, gate, fail_every in scenarios:
        admitted, decisions, seconds = _run(gate, classes, fail_every)
        print(
            f"{name:<10} {decisions / seconds:>12,.0f} decisions/s "
            f"({seconds * 1e9 / decisions:5.0f} ns each; {admitted / decisions:6.1%} admitted)"
        )
    rnd = random.Random(7)
    demands = {p: rnd.choice([0, 1, 5, 40]) for p in range(64)}
    rounds = 20_000
    started = time.perf_counter()
    for _ in range(rounds):
        allocate(100, demands)
    seconds = time.perf_counter() - started
    print(f"{'share':<10} {rounds / seconds:>12,.0f} allocations/s of 64 partitions")


if __name__ == "__main__":
    main()
