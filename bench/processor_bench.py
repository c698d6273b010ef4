"""The Processor in-process over tests/coordinator/fakes.py: results per second, no Kafka at all.

Only the Processor's own calls are timed, in CPU time of this process (the machine is shared;
wall time would count other processes): inputs, ticks, checkpoints, delivery callbacks. The
results it is fed are built beforehand. Two workloads, each in both modes (Faust's
at-least-once, and transactional with a checkpoint every `--checkpoint-every` results, as the
confluent engine does per transaction):

- catching-up: `--streams` streams 20 days behind, every task acked at once; the clock moves
  as if the results arrived at `--rate` per second (the confluent engine's target, 15,000), so
  that what the engine does per interval of time (a stream's view at most once a second,
  `TIDEMARK_VIEW_INTERVAL_MS`) happens as often per result as it would there;
- live: `--streams` streams of 1 s windows, ticked every second, 1 result in 10 a nack.

`--source S`: every stream names source S, and the Processor admits every dispatch as the
engines do (streams.coordinator.admission, with the outage guard's counts), S without limits
unless `--max-in-flight N`: what admission costs per result (`--no-admission`: the same
streams and guard without it, as before issue 29).

    .venv/bin/python bench/processor_bench.py              # the figures
    .venv/bin/python bench/processor_bench.py --profile catching-up-transactional
    .venv/bin/python bench/processor_bench.py --root /tmp/base --modes faust   # another checkout

Instructions per result, which a shared machine does not move (CPU time moved by a quarter
between identical runs): run one case at two sizes under valgrind and divide the difference,
so that the setup cancels out:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null .venv/bin/python \
        bench/processor_bench.py --case catching-up-transactional --repeat 1 \
        --gc-threshold 50000 --results 10000     # then --results 2000; (Ir - Ir) / 8000
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import platform
import pstats
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

DAY_MS = 86_400_000
NOW_MS = 1_798_500_000_000  # 2026-12-29, a fixed clock


@dataclass
class Figure:
    case: str
    results: int
    elapsed_s: float

    def line(self) -> str:
        rate = self.results / self.elapsed_s
        return (
            f"{self.case:<28} {self.results:>8} results  {rate:>9,.0f}/s  {1e6 / rate:6.1f} µs each"
        )


SOURCE: dict[str, Any] = {}  # --source: the streams' source and its limits (None: none)


def _driver(transactional: bool) -> Any:
    from streams.coordinator.settings import CoordinatorSettings
    from tests.coordinator.fakes import Driver

    if transactional:
        view_interval_ms = CoordinatorSettings().view_interval_ms  # the engine's default
        d = Driver(
            flush_ms=200,
            transactional=True,
            checkpoint_each=False,
            view_interval_ms=view_interval_ms,
        )
    else:
        d = Driver(flush_ms=200)
    if SOURCE:
        _admit(d, transactional)
    return d


def _admit(d: Any, transactional: bool) -> None:
    """The driver's Processor made again as the engines make it: a guard and admission."""
    from streams.coordinator.health import SourceHealth
    from streams.coordinator.processor import Processor
    from streams.core import OutagePolicy
    from tests.coordinator.fakes import delivery

    limits = SOURCE["limits"]
    health = SourceHealth(OutagePolicy(), "bench", dict)
    d.processor = Processor(
        d.topics,
        d.partitions,
        d.store,
        d.emitter,
        200,
        replay_store=d.replay_store,
        replay_concurrency=1,
        monotonic_ms=d._monotonic_ms,
        delivery=delivery(transactional, d.view_interval_ms),
        health=health,
        source_limits=(lambda: limits) if SOURCE["admit"] else None,
    )


def _config() -> dict[str, Any]:
    return {"source": SOURCE["name"]} if SOURCE else {}


def _tasks(d: Any) -> list[dict[str, Any]]:
    tasks = d.topics.tasks
    return [orjson.loads(s.value) for s in d.emitter.sent if s.topic == tasks]


def _result(task: dict[str, Any], nack: bool) -> bytes:
    fields = {k: task[k] for k in ("stream_id", "start_ms", "end_ms", "attempt")}
    if nack:
        fields.update(outcome="nack", error={"kind": "no_data", "message": "not yet"})
    else:
        fields.update(outcome="ack", ack_ms=task["end_ms"])
    return orjson.dumps(fields)


PROFILER: cProfile.Profile | None = None  # --profile: on only while the Processor is timed


class _Run:
    """Feeds one driver and times only the Processor's calls."""

    def __init__(self, transactional: bool, checkpoint_every: int) -> None:
        self.d = _driver(transactional)
        self.transactional = transactional
        self.checkpoint_every = checkpoint_every
        self.handled = 0
        self.elapsed_s = 0.0

    def feed(self, tasks: list[dict[str, Any]], now_ms: int, nack: Callable[[dict], bool]) -> None:
        d, p = self.d, self.d.processor
        topic = d.topics.results
        batch = [
            (d.partition(t["stream_id"]), t["stream_id"].encode(), _result(t, nack(t)))
            for t in tasks
        ]
        d.emitter.sent = []
        on_message, every = p.on_message, self.checkpoint_every
        checkpoint = p.checkpoint if self.transactional else None
        handled = self.handled
        if PROFILER is not None:
            PROFILER.enable()
        began = time.process_time()
        for partition, key, raw in batch:
            on_message(topic, partition, handled, key, raw, now_ms)
            handled += 1
            if checkpoint is not None and handled % every == 0:
                checkpoint(now_ms)
        if not self.transactional:
            d.emitter.deliver_all()
        self.elapsed_s += time.process_time() - began
        if PROFILER is not None:
            PROFILER.disable()
        self.handled = handled

    def tick(self, now_ms: int) -> None:
        p = self.d.processor
        if PROFILER is not None:
            PROFILER.enable()
        began = time.process_time()
        for partition in p.partitions_to_tick(now_ms):
            p.on_tick(partition, now_ms)
        if self.transactional:
            p.checkpoint(now_ms)
        self.elapsed_s += time.process_time() - began
        if PROFILER is not None:
            PROFILER.disable()


def catching_up(
    transactional: bool, streams: int, total: int, checkpoint_every: int, rate: int = 15_000
) -> Figure:
    run = _Run(transactional, checkpoint_every)
    d = run.d
    d.processor.on_assigned(range(d.partitions))
    now = NOW_MS
    for i in range(streams):
        d.upsert(f"cluster-{i}", now, start_ms=now - 20 * DAY_MS, window_ms=60_000,
                 step_ms=15_000, **_config())  # fmt: skip
    run.tick(now)
    tasks = _tasks(d)  # each stream's first window, dispatched by its upsert
    run.handled, run.elapsed_s = 0, 0.0
    if not tasks:
        raise SystemExit("nothing was dispatched")
    while run.handled < total:
        run.feed(tasks, now, lambda t: False)
        now += max(1, len(tasks) * 1000 // rate)  # the results took this long to arrive
        tasks = _tasks(d)
    mode = "transactional" if transactional else "faust"
    return Figure(f"catching-up, {mode}", run.handled, run.elapsed_s)


def live(transactional: bool, streams: int, total: int, checkpoint_every: int) -> Figure:
    run = _Run(transactional, checkpoint_every)
    d = run.d
    d.processor.on_assigned(range(d.partitions))
    now = NOW_MS - NOW_MS % 1000
    retry = {"strategy": "fixed", "interval_ms": 1000}
    for i in range(streams):
        d.upsert(
            f"live-{i}", now, start_ms=now, window_ms=1000, step_ms=1000, retry=retry,
            bypass_after_ms=5000, **_config(),
        )  # fmt: skip
    run.handled, run.elapsed_s = 0, 0.0

    def nack(task: dict[str, Any]) -> bool:  # 1 in 10, the same for the same task
        return zlib.crc32(task["task_id"].encode()) % 10 == 0

    carried: list[dict[str, Any]] = []  # tasks dispatched by results (after a bypass)
    while run.handled < total:
        now += 1000
        d.emitter.sent = []
        run.tick(now)
        tasks = carried + _tasks(d)
        if not tasks:
            raise SystemExit("nothing was dispatched")
        run.feed(tasks, now + 50, nack)
        carried = _tasks(d)
    mode = "transactional" if transactional else "faust"
    return Figure(f"live with nacks, {mode}", run.handled, run.elapsed_s)


CASES = {
    "catching-up-faust": lambda a: catching_up(
        False, a.streams, a.results, a.checkpoint_every, a.rate
    ),
    "catching-up-transactional": lambda a: catching_up(
        True, a.streams, a.results, a.checkpoint_every, a.rate
    ),
    "live-faust": lambda a: live(False, a.streams, a.results, a.checkpoint_every),
    "live-transactional": lambda a: live(True, a.streams, a.results, a.checkpoint_every),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--results", type=int, default=40_000)
    parser.add_argument("--checkpoint-every", type=int, default=1000)
    parser.add_argument(
        "--rate", type=int, default=15_000, help="catching-up: results per second of the clock"
    )
    parser.add_argument("--modes", default="faust,transactional")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--profile", choices=sorted(CASES), help="cProfile one case instead")
    parser.add_argument(
        "--case", choices=sorted(CASES), help="run only this case (e.g. under valgrind)"
    )
    parser.add_argument(
        "--gc-threshold",
        type=int,
        default=None,
        help="gen0 GC threshold, as the confluent engine sets it (50000); default: Python's 700",
    )
    parser.add_argument("--source", help="every stream names this source, admitted (see above)")
    parser.add_argument("--max-in-flight", type=int, help="with --source: its cap")
    parser.add_argument(
        "--no-admission", action="store_true", help="with --source: the guard alone (before)"
    )
    args = parser.parse_args()
    if args.source:
        from streams.core.admission import SourceLimits

        cap = args.max_in_flight
        limits = {} if cap is None else {args.source: SourceLimits(args.source, max_in_flight=cap)}
        SOURCE.update(name=args.source, limits=limits, admit=not args.no_admission)
    if args.gc_threshold is not None:
        gc.set_threshold(args.gc_threshold, 20, 100)
    sys.path.insert(0, str(args.root))
    if args.profile:
        global PROFILER
        PROFILER = cProfile.Profile()
        figure = CASES[args.profile](args)
        print(figure.line(), "(under the profiler)")
        pstats.Stats(PROFILER).sort_stats("tottime").print_stats(30)
        return
    modes = args.modes.split(",")
    print(
        f"Processor in-process, {args.streams} streams, checkpoint every "
        f"{args.checkpoint_every} results; {platform.machine()}, Python {platform.python_version()}"
        f"; gc threshold {gc.get_threshold()[0]}"
    )
    for name, case in CASES.items():
        if name.rsplit("-", 1)[1] not in modes or (args.case and name != args.case):
            continue
        best = min((case(args) for _ in range(args.repeat)), key=lambda f: f.elapsed_s / f.results)
        print(best.line())


if __name__ == "__main__":
    main()
