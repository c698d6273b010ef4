"""Micro-benchmark of the pure lifecycle core: prints decisions per second on one core.

Run: .venv/bin/python bench/core_bench.py [--streams 1000] [--rounds 50]

Scenarios (each decision is one call of apply_result or advance):
- ack cycles: catching-up streams; every full ack commits a window and dispatches the next one.
- nack cycles: every nack requeues the window, retried at once (Immediate policy).
- timeout cycles: advance() past the deadline times the attempt out and dispatches a retry.
- state round trip (informational): state_to_dict + json + state_from_dict, as a store would.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from streams.core import (
    Decision,
    ErrorInfo,
    Immediate,
    Result,
    StreamConfig,
    StreamState,
    Task,
    advance,
    announce,
    apply_result,
    create_state,
    state_from_dict,
    state_to_dict,
)

NOW_MS = 1_795_946_400_000  # 2026-11-29T10:00:00Z
DAY_MS = 86_400_000
FLUSH_EVERY = 16
NO_DATA = ErrorInfo("no_data", "empty window")


def _streams(count: int, **overrides: object) -> list[tuple[StreamState, Task]]:
    pairs = []
    for i in range(count):
        config = StreamConfig(f"cluster-{i}", NOW_MS - DAY_MS, **overrides)  # type: ignore[arg-type]
        decision = create_state(config, NOW_MS)
        assert decision.state is not None and decision.tasks
        pairs.append((decision.state, decision.tasks[0]))
    return pairs


def _only_task(decision: Decision) -> Task:
    assert decision.rejected is None and decision.ignored is None and len(decision.tasks) == 1
    return decision.tasks[0]


def ack_cycles(streams: int, rounds: int) -> tuple[int, float]:
    pairs = _streams(streams)
    decisions = 0
    started = time.perf_counter()
    for _ in range(rounds):
        for i, (state, task) in enumerate(pairs):
            result = Result(
                task.stream_id, task.start_ms, task.end_ms, task.attempt, "ack", task.end_ms
            )
            pairs[i] = (state, _only_task(apply_result(state, result, NOW_MS)))
            if len(state.unannounced) >= FLUSH_EVERY:
                announce(state, NOW_MS)
            decisions += 1
    return decisions, time.perf_counter() - started


def nack_cycles(streams: int, rounds: int) -> tuple[int, float]:
    pairs = _streams(streams, retry=Immediate(), bypass_after_ms=10 * DAY_MS)
    decisions = 0
    started = time.perf_counter()
    for _ in range(rounds):
        for i, (state, task) in enumerate(pairs):
            result = Result(
                task.stream_id, task.start_ms, task.end_ms, task.attempt, "nack", error=NO_DATA
            )
            pairs[i] = (state, _only_task(apply_result(state, result, NOW_MS)))
            decisions += 1
    return decisions, time.perf_counter() - started


def timeout_cycles(streams: int, rounds: int) -> tuple[int, float]:
    timeout_ms = 1_000
    pairs = _streams(streams, retry=Immediate(), task_timeout_ms=timeout_ms, bypass_after_ms=DAY_MS)
    decisions = 0
    now_ms = NOW_MS
    started = time.perf_counter()
    for _ in range(rounds):
        now_ms += timeout_ms
        for state, _task in pairs:
            decision = advance(state, now_ms)
            assert decision.timeouts == 1 and len(decision.tasks) == 1
            decisions += 1
    return decisions, time.perf_counter() - started


def round_trips(streams: int, rounds: int) -> tuple[int, float]:
    states = [state for state, _ in _streams(streams, max_in_flight=4)]
    count = 0
    started = time.perf_counter()
    for _ in range(max(rounds // 10, 1)):
        for state in states:
            state_from_dict(json.loads(json.dumps(state_to_dict(state))))
            count += 1
    return count, time.perf_counter() - started


def _report(
    name: str, unit: str, run: Callable[[int, int], tuple[int, float]], a: int, b: int
) -> None:
    count, seconds = run(a, b)
    print(f"{name:<16} {count:>9,} {unit} in {seconds:6.3f} s = {count / seconds:>10,.0f} {unit}/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    print(f"{args.streams:,} streams x {args.rounds} rounds, one core")
    _report("ack cycles", "decisions", ack_cycles, args.streams, args.rounds)
    _report("nack cycles", "decisions", nack_cycles, args.streams, args.rounds)
    _report("timeout cycles", "decisions", timeout_cycles, args.streams, args.rounds)
    _report("state round trip", "states", round_trips, args.streams, args.rounds)


if __name__ == "__main__":
    main()
