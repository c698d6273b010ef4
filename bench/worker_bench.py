"""Worker throughput: how many tasks a second `tidemark worker` turns into results.

    .venv/bin/python bench/worker_bench.py [--tasks 20000] [--latency-ms 20]
        [--concurrency 16] [--buffer 64] [--workers 1] [--worker-cpus 1]

Uses KAFKA_BOOTSTRAP_SERVERS if set, else starts a local broker (streams.dev.broker) for the run.

Pre-fills `tasks` (6 partitions) with `--tasks` tasks of 500 streams, every window already
ended and its deadline an hour away, then starts `--workers` processes of `tidemark worker
--pipeline synthetic --option latency_ms=<latency>` and reads `results` until there is one
per task. Printed: results/s from the first result to the last, beside the ceiling the
handler threads allow (workers x concurrency / latency), and each worker's CPU time per
result (from /proc). `--resume-probe` measures instead how long a consumer waits for its next
message after it resumes paused partitions (what a pause costs a worker). `--round-trip N`
measures a lone task's latency instead: N tasks produced one at a time to an idle worker, each
timed from its produce to its result read (the handler's `--latency-ms` included), p50 and p99.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from common import broker_for_run, consumer, now_ms
from confluent_kafka import Producer

from streams.kafka.admin import create_topics
from streams.kafka.settings import KafkaSettings
from streams.topics import TopicSpec

PARTITIONS = 6
CLK_TCK = os.sysconf("SC_CLK_TCK")
BENCH = Path(__file__).resolve().parent  # bench_handlers, for --handler async
STREAMS = 500
HOUR_MS = 3_600_000


def prefill(kafka: KafkaSettings, prefix: str, tasks: int) -> None:
    producer = Producer(kafka.producer(**{"linger.ms": 20}))
    now = now_ms()
    origin = now - now % 1000 - tasks // STREAMS * 1000 - 1000
    for i in range(tasks):
        sid = f"w-{i % STREAMS:04d}"
        start = origin + (i // STREAMS) * 1000
        task = {"task_id": f"{sid}/{start}/1", "stream_id": sid, "start_ms": start,
                "end_ms": start + 1000, "step_ms": 1000, "attempt": 1, "dispatched_ms": now,
                "deadline_ms": now + HOUR_MS, "params": {}}  # fmt: skip
        producer.produce(f"{prefix}.tasks", json.dumps(task).encode(), sid.encode())
        if i % 5000 == 0:
            producer.poll(0)
    left = producer.flush(60)
    if left:
        raise SystemExit(f"{left} tasks not delivered within 60 s")


def resume_probe(kafka: KafkaSettings, prefix: str, rounds: int = 10) -> list[float]:
    """Milliseconds from a consumer's resume of its paused partitions to its next message, with
    plenty left to read: what a pause costs a worker."""
    probe = consumer(kafka, [f"{prefix}.tasks"])
    taken = 0
    while taken < 100:  # assigned, fetching
        m = probe.poll(1.0)
        taken += m is not None and m.error() is None
    waits = []
    for _ in range(rounds):
        assignment = probe.assignment()
        probe.pause(assignment)
        for _ in range(3):
            probe.poll(0.01)
        probe.resume(assignment)
        began = time.monotonic()
        while (m := probe.poll(1.0)) is None or m.error() is not None:
            pass
        waits.append((time.monotonic() - began) * 1000)
        for _ in range(10):
            probe.poll(0.05)
    probe.close()
    return sorted(waits)


def round_trip(kafka: KafkaSettings, prefix: str, results: Any, tasks: int) -> list[float]:
    """Milliseconds from producing a lone task (its window ended) to reading its result."""
    producer = Producer(kafka.producer(**{"linger.ms": 0}))
    waits = []
    for i in range(tasks + 1):  # the first one waits for the worker's assignment: not counted
        now = now_ms()
        start = now - now % 1000 - 1000
        sid = f"rt-{i % STREAMS:04d}"
        task = {"task_id": f"{sid}/{start}/1", "stream_id": sid, "start_ms": start,
                "end_ms": start + 1000, "step_ms": 1000, "attempt": 1, "dispatched_ms": now,
                "deadline_ms": now + HOUR_MS, "params": {}}  # fmt: skip
        began = time.monotonic()
        producer.produce(f"{prefix}.tasks", json.dumps(task).encode(), sid.encode())
        producer.flush(10)
        while True:
            m = results.poll(60.0)
            if m is None:
                raise SystemExit(f"no result for task {i} within 60 s")
            if m.error() is None:
                r = json.loads(m.value())
                if (r["stream_id"], r["start_ms"], r["outcome"]) == (sid, start, "ack"):
                    break
        if i:
            waits.append((time.monotonic() - began) * 1000)
    return sorted(waits)


def cpu_by_thread(pid: int) -> dict[str, float]:
    """CPU seconds of a process's threads, by name (digits dropped: the handler threads as
    one, librdkafka's `rdk:broker` threads as one)."""
    found: dict[str, float] = {}
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            name, fields = stat.read_text().split(" (", 1)[1].rsplit(")", 1)
        except OSError:  # the thread ended
            continue
        values = fields.split()
        key = re.sub(r"[-\d]+$", "", name) or name
        found[key] = found.get(key, 0.0) + (int(values[11]) + int(values[12])) / CLK_TCK
    return found


def run_queue_s(pid: int) -> float:
    """Seconds the process's threads have waited for a CPU while runnable (schedstat): what
    other processes on a shared machine took from it."""
    waited_ns = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            waited_ns += int(stat.read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return waited_ns / 1e9


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def run(kafka: KafkaSettings, args: argparse.Namespace, home: Path) -> None:
    prefix = f"wbench-{uuid.uuid4().hex[:6]}"
    create_topics(kafka, [TopicSpec(f"{prefix}.{t}", PARTITIONS) for t in ("tasks", "results")])
    if not args.round_trip:
        prefill(kafka, prefix, args.tasks)
    if args.resume_probe:
        waits = resume_probe(kafka, prefix)
        print(f"resume -> next message: median {waits[len(waits) // 2]:,.0f} ms, max "
              f"{waits[-1]:,.0f} ms ({len(waits)} pauses)")  # fmt: skip
        return
    results = consumer(kafka, [f"{prefix}.results"])
    pipeline = "bench_handlers:AsyncSleep" if args.handler == "async" else "synthetic"
    cmd = [
        sys.executable, "-m", "streams", "worker", "--pipeline", pipeline,
        "--prefix", prefix, "--bootstrap-servers", kafka.bootstrap_servers,
        "--concurrency", str(args.concurrency), "--buffer", str(args.buffer),
        "--option", f"latency_ms={args.latency_ms}",
    ]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(BENCH), os.environ.get("PYTHONPATH", "")]),
    }
    logs = [open(home / f"worker-{i}.log", "ab") for i in range(args.workers)]  # noqa: SIM115
    procs = [subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env) for log in logs]
    for proc in procs:  # at once, while Python starts: the threads it makes later inherit it
        if args.worker_cpus:
            os.sched_setaffinity(proc.pid, args.worker_cpus)
    if args.round_trip:
        try:
            waits = round_trip(kafka, prefix, results, args.round_trip)
        finally:
            for p in procs:
                p.terminate()
                p.wait(30)
            results.close()
        print(f"a lone task, produce -> result read: p50 {waits[len(waits) // 2]:,.1f} ms, p99 "
              f"{waits[int(len(waits) * 0.99)]:,.1f} ms, max {waits[-1]:,.1f} ms ({len(waits)} "
              f"tasks, the handler sleeping {args.latency_ms} ms)")  # fmt: skip
        return
    seen, first, last = 0, 0.0, 0.0
    deadline = time.monotonic() + args.timeout
    pids = [p.pid for p in procs]
    spy: subprocess.Popen[bytes] | None = None
    cpu_at_first: list[float] = []
    try:
        while seen < args.tasks:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {seen:,} of {args.tasks:,} results in {args.timeout:g} s")
            for m in results.consume(1000, 0.2):
                if m.error() is None:
                    seen += 1
                    last = time.monotonic()
                    if not first:
                        first, seen_at_first = last, seen
                        cpu_at_first = [cpu_s(pid) for pid in pids]
                        threads_at_first = cpu_by_thread(pids[0])
                        queued_at_first = run_queue_s(pids[0])
                        if args.py_spy:  # the first worker, from its first result on
                            spy = subprocess.Popen(["py-spy", "record", "--pid", str(pids[0]),
                                "--nonblocking", "--threads", "-r", "200", "-f", "raw", "-o",
                                args.py_spy], stdout=subprocess.DEVNULL)  # fmt: skip
        cpu = [cpu_s(pid) for pid in pids]
        threads = cpu_by_thread(pids[0])
        queued_s = run_queue_s(pids[0]) - queued_at_first
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its samples on an interrupt
            spy.wait(30)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
        results.close()
    took = last - first
    rate = (args.tasks - seen_at_first) / took
    # --latency-ms 0: a handler that returns at once (what the worker costs alone), no ceiling
    # but the core's.
    ceiling = args.workers * args.concurrency / (args.latency_ms / 1000 or 1e-9)
    running = "coroutines" if args.handler == "async" else "threads"
    print(f"{args.tasks:,} tasks, {args.workers} worker(s) x {args.concurrency} {running}, "
          f"latency {args.latency_ms} ms, buffer {args.buffer}:")  # fmt: skip
    allowed = (f"{rate / ceiling:.0%} of the {ceiling:,.0f}/s that {args.concurrency} {running} "
               f"of {args.latency_ms} ms allow" if args.latency_ms else "handlers that return "
               "at once")  # fmt: skip
    print(f"  {rate:,.0f} results/s ({took:.1f} s from the first result to the last): {allowed}")
    steady_s = sum(cpu) - sum(cpu_at_first)
    per_result_s = steady_s / (args.tasks - seen_at_first)
    core = args.workers / per_result_s  # what the workers' cores allow at that cost
    print(f"  worker CPU: {sum(cpu):.1f} s in all; {per_result_s * 1e6:,.0f} µs per result "
          f"from the first result to the last (start-up left out), {steady_s / took:.0%} of "
          f"a core each")  # fmt: skip
    counted = args.tasks - seen_at_first
    shares = sorted(
        ((v - threads_at_first.get(k, 0.0), k) for k, v in threads.items()), reverse=True
    )
    print("  the first worker's threads, µs per result: " + ", ".join(
        f"{name} {spent / counted * 1e6:,.0f}" for spent, name in shares if spent > 0))  # fmt: skip
    print(f"  the first worker's threads waited {queued_s:.1f} s in all for a CPU while "
          f"runnable (other processes; {os.getloadavg()[0]:.1f} load average)")  # fmt: skip
    print(f"  at that cost a core allows {core:,.0f} results/s a worker: the rate is "
          f"{rate / min(core, ceiling):.0%} of the lower ceiling")  # fmt: skip


def _cpus(text: str) -> set[int]:
    try:
        cpus = {int(part) for part in text.split(",")}
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: CPU numbers, comma-separated") from None
    unknown = cpus - set(os.sched_getaffinity(0))
    if unknown:
        raise argparse.ArgumentTypeError(f"no CPU {sorted(unknown)} here")
    return cpus


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--buffer", type=int, default=64)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument(
        "--handler",
        choices=("thread", "async"),
        default="thread",
        help="thread: the synthetic pipeline on threads; async: a coroutine that sleeps",
    )
    parser.add_argument(
        "--py-spy",
        metavar="FILE",
        help="sample the first worker with py-spy, into FILE (collapsed stacks)",
    )
    parser.add_argument(
        "--resume-probe",
        action="store_true",
        help="instead: how long a consumer waits for a message after resuming (what a pause costs)",
    )
    parser.add_argument(
        "--round-trip",
        type=int,
        default=0,
        metavar="N",
        help="instead: N lone tasks one at a time, each timed from its produce to its result",
    )
    parser.add_argument(
        "--worker-cpus",
        type=_cpus,
        default=None,
        metavar="N[,M...]",
        help="run the workers on these CPUs alone, and the broker and this script on the others "
        "(what a worker's own core allows, apart from the broker's load on a small machine)",
    )
    args = parser.parse_args()
    if args.worker_cpus:
        others = set(os.sched_getaffinity(0)) - args.worker_cpus
        if not others:
            parser.error("--worker-cpus: leave at least one CPU for the broker and this script")
        os.sched_setaffinity(0, others)  # the broker, started below, inherits it
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    if args.worker_cpus:
        print(f"workers on CPU {sorted(args.worker_cpus)}, the broker and this script on "
              f"{sorted(os.sched_getaffinity(0))}")  # fmt: skip
    with (
        tempfile.TemporaryDirectory(prefix="worker-bench-") as tmp,
        broker_for_run(Path(tmp)) as kafka,
    ):
        run(kafka, args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
