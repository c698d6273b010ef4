"""The worker's own cost per task, in-process: the real ``WorkerRuntime`` over a list of
task records and a sink that confirms every send, no Kafka at all.

What it times is what the loop thread does for a task besides the handler's wait: decode the
task, admit and start it, call a handler that acks at once (inline), check its outcome, encode
the result, count it, serve its delivery report and commit its offset. The handler runs
in the loop's thread (an inline executor) and every send is confirmed at the next sink poll, so
that the figure is the CPU time of this process alone (the machine is shared: wall time would
count other processes). Logging goes to a file at ``--log-level`` (INFO, as ``tidemark worker``
logs by default), since a log line per task is part of what a worker pays.

    .venv/bin/python bench/worker_loop_bench.py [--tasks 20000] [--log-level INFO]
    .venv/bin/python bench/worker_loop_bench.py --profile     # cProfile, by own time

Instructions per task, which a shared machine does not move: run it at two sizes under
valgrind and divide the difference, so that the start-up cancels out:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null .venv/bin/python \
        bench/worker_loop_bench.py --tasks 6000     # then --tasks 2000; (Ir - Ir) / 4000

and the same two with ``--setup-only`` (the records built, no loop), to subtract.

The Kafka clients' share (librdkafka's threads, the Python side of poll and produce) is not
here: bench/worker_bench.py measures a whole worker process against a broker.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import platform
import pstats
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path

from prometheus_client import CollectorRegistry

from streams.handler import Ack, Outcome, Task
from streams.kafka.member import Delivered, Fetched, Partition, SourceListener
from streams.worker.config import WorkerConfig
from streams.worker.runtime import WorkerRuntime

TASKS = "tidemark.tasks"
NOW_MS = 1_798_500_000_000  # a fixed clock: every window has ended, no deadline has passed
HOUR_MS = 3_600_000
STREAMS = 500
PARTITIONS = 6


def ack(task: Task) -> Outcome:
    """A handler that does nothing: what is left is the worker's own cost."""
    return Ack(task.end_ms)


class InlineExecutor:
    """Runs each handler call at once, in the loop's thread."""

    def start(self) -> None:
        pass

    def submit(self, call: Callable[[], None]) -> None:
        call()

    def close(self, timeout_s: float) -> bool:
        return True


class ListSource:
    """A task source over a list of records, all its partitions assigned at the first poll."""

    def __init__(self, records: list[Fetched]) -> None:
        self._records = deque(records)
        self._partitions = sorted({r.partition for r in records})
        self._listener: SourceListener | None = None

    def open(self, listener: SourceListener) -> None:
        self._listener = listener

    def poll(self, timeout_s: float) -> Fetched | None:
        if self._listener is not None:
            self._listener.assigned(self._partitions)
            self._listener = None
        return self._records.popleft() if self._records else None

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass

    def commit(self, positions: Mapping[Partition, int], *, wait: bool) -> bool:
        return True

    def close(self) -> None:
        pass


class ConfirmingSink:
    """A result sink whose broker confirms every send at the next poll; keeps nothing."""

    def __init__(self) -> None:
        self.sent = 0
        self._waiting: list[Delivered] = []

    def open(self, on_fatal: Callable[[str], None]) -> None:
        pass

    def send(self, key: bytes, value: bytes, delivered: Delivered) -> None:
        self.sent += 1
        self._waiting.append(delivered)

    def poll(self) -> None:
        waiting, self._waiting = self._waiting, []
        for delivered in waiting:
            delivered(None)

    def flush(self, timeout_s: float) -> int:
        self.poll()
        return 0


def task_value(i: int) -> bytes:
    sid = f"w-{i % STREAMS:04d}"
    start = NOW_MS - HOUR_MS + (i // STREAMS) * 1000
    task = {"task_id": f"{sid}/{start}/1", "stream_id": sid, "start_ms": start,
            "end_ms": start + 1000, "step_ms": 1000, "attempt": 1, "dispatched_ms": NOW_MS,
            "deadline_ms": NOW_MS + HOUR_MS, "params": {}}  # fmt: skip
    return json.dumps(task).encode()


def run(
    tasks: int, profile: bool, setup_only: bool = False
) -> tuple[float, int, pstats.Stats | None]:
    """Work `tasks` tasks through a runtime; the CPU seconds it took and the results sent."""
    records = [
        Fetched((TASKS, i % PARTITIONS), i // PARTITIONS, task_value(i)) for i in range(tasks)
    ]
    source, sink = ListSource(records), ConfirmingSink()
    runtime = WorkerRuntime(
        ack,
        WorkerConfig("synthetic", concurrency=16, buffer=64, grace_s=0.0),
        source,
        sink,
        executor=InlineExecutor(),
        registry=CollectorRegistry(),
        now_ms=lambda: NOW_MS,
        monotonic_ms=lambda: NOW_MS,
    )
    runtime.open()
    if setup_only:
        return 0.0, tasks, None
    profiler = cProfile.Profile() if profile else None
    began = time.process_time()
    if profiler is not None:
        profiler.enable()
    while sink.sent < tasks:
        runtime.turn()
    runtime.turn()  # the last delivery reports, and their commit
    if profiler is not None:
        profiler.disable()
    took = time.process_time() - began
    runtime.stop()
    runtime.shutdown()
    return took, sink.sent, None if profiler is None else pstats.Stats(profiler)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--setup-only", action="store_true", help="build the records, no loop")
    parser.add_argument("--profile", action="store_true", help="cProfile the run, by own time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="worker-loop-bench-") as tmp:
        logging.basicConfig(
            level=args.log_level.upper(),
            filename=str(Path(tmp) / "worker.log"),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        took, sent, stats = run(args.tasks, args.profile, args.setup_only)
        logging.shutdown()
    print(f"{platform.machine()}, Python {platform.python_version()}, log level {args.log_level}")
    print(f"{sent:,} tasks: {took / sent * 1e6:.1f} µs of CPU per task (the worker's loop alone)")
    if stats is not None:
        stats.sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
