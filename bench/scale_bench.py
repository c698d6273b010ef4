"""Scale benchmark: one coordinator with many streams registered (100,000 by default).

    .venv/bin/python bench/scale_bench.py [--engine confluent|faust|both] [--streams 100000]
        [--probes 10] [--timeout 600] [--logs DIR] [--no-browser] [--no-page] [--skip-restarts]

Uses KAFKA_BOOTSTRAP_SERVERS if set, else starts a local broker (streams.dev.broker) for the run.

The streams are registered in bulk, by producing upserts to `control` directly (murmur2
partitioner, keyed by stream id): one-minute windows (step 15 s) starting now, with
`delay_ms` one hour, so that none of them is due during the run: this measures what holding
them costs, not a flood of dispatches. Beside them run `--probes` live streams of 1 s windows
that a stand-in worker acks at once (read_committed), so there is always something due: the
first new task of a probe after a restart is the "first dispatch".

Printed, and tabled at the end:
  - registration: from the first upsert produced to /health's `indexed_streams` counting all;
  - RSS: the coordinator's VmRSS (and VmHWM, its peak) from /proc/<pid>/status then;
  - `tidemark streams list --output json` (to /dev/null) then, in a process of its own: its
    wall time and peak RSS, and that it lists every stream (the read model reads the compacted
    `streams` and `bypassed` topics only);
  - the status page's first render then (bench/status_page_bench.py): `tidemark dashboard`
    started over those topics, to its first page of `/api/streams` and to every stream
    counted, in headless Chromium too (`--no-browser` skips it); then single sorted and
    searched requests, and its RSS;
  - restart, same disk: SIGTERM, start again; time from the start to the first new task
    (dispatched after the stop) on `tasks`, and to /health ready with every stream indexed;
  - lost disk: SIGKILL, delete the data folder, start again; time to /health ready with every
    stream indexed (restored from the changelog), and to the first new task; RSS after;
  - rebuilds of the due-index in each phase, from the coordinator's log: one per assignment, so
    more than one per start means the group rebalanced (a loop blocked past the session).
`--skip-restarts` stops after the status page (no restart, no lost disk).
Every wait is bounded by --timeout; on a timeout it says what it was waiting for, stops what it
started and exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from common import (
    Worker,
    broker_for_run,
    check_engine,
    coordinator,
    engines_of,
    note_engines,
    now_ms,
    rss_kib,
)
from confluent_kafka import Producer
from status_page_bench import status_page

from streams.kafka.settings import KafkaSettings
from tests.support.coordinator import CoordinatorProcess

HOUR_MS = 3_600_000


class BenchTimeout(Exception):
    pass


class AckWorker(Worker):
    """The stand-in worker on a thread of its own; remembers the first task dispatched at or
    after `mark_ms`."""

    def __init__(self, kafka: KafkaSettings, prefix: str) -> None:
        super().__init__(kafka, prefix)
        self.mark_ms: int | None = None
        self.first_after: float | None = None  # time.monotonic() when it was received
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ack-worker", daemon=True)

    def on_task(self, task: dict[str, Any], received_ms: int) -> None:
        mark = self.mark_ms
        if mark is not None and self.first_after is None and task["dispatched_ms"] >= mark:
            self.first_after = time.monotonic()

    def arm(self) -> None:
        self.first_after, self.mark_ms = None, now_ms()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step(0.1)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.close()


def wait_indexed(
    proc: CoordinatorProcess, expected: int, timeout_s: float, what: str
) -> dict[str, Any]:
    """Until /health says ok, with partitions, and `indexed_streams` >= expected."""
    began = time.monotonic()
    deadline, report = began + timeout_s, began + 10
    doc: dict[str, Any] | None = None
    while True:
        if proc.proc is None or proc.proc.poll() is not None:
            raise BenchTimeout(f"{what}: the coordinator exited; log tail:\n{proc.tail()}")
        doc = proc.health()
        if doc and doc.get("status") == "ok" and doc.get("partitions"):
            if "indexed_streams" not in doc:
                raise BenchTimeout(
                    f"{what}: /health has no indexed_streams ({sorted(doc)}); this bench needs "
                    "it to tell when every stream is registered or restored"
                )
            if doc["indexed_streams"] >= expected:
                return doc
        now = time.monotonic()
        if now >= deadline:
            raise BenchTimeout(
                f"{what}: not ready with {expected:,} streams indexed within {timeout_s:g} s; "
                f"last /health: {json.dumps(doc)[:300] if doc else 'no answer'}"
            )
        if now >= report:
            seen = doc.get("indexed_streams") if doc else None
            status = doc.get("status") if doc else "no answer"
            print(f"  ... {what}: {now - began:.0f} s, /health {status}, indexed {seen} of "
                  f"{expected:,}", flush=True)  # fmt: skip
            report = now + 10
        time.sleep(0.2)


def wait_first_dispatch(worker: AckWorker, proc: CoordinatorProcess, timeout_s: float) -> float:
    """Monotonic time of the first task dispatched since the worker was armed."""
    deadline = time.monotonic() + timeout_s
    while worker.first_after is None:
        if proc.proc is None or proc.proc.poll() is not None:
            raise BenchTimeout(f"first dispatch: the coordinator exited; log:\n{proc.tail()}")
        if time.monotonic() >= deadline:
            raise BenchTimeout(f"first dispatch: no new task on tasks within {timeout_s:g} s")
        time.sleep(0.02)
    return worker.first_after


def register(kafka: KafkaSettings, prefix: str, streams: int, probes: int) -> None:
    control = Producer(kafka.producer(**{"linger.ms": 20}))
    now = now_ms()
    for i in range(probes):  # live, 1 s windows: always something due
        sid = f"probe-{i:03d}"
        doc = {"type": "upsert", "stream_id": sid, "start_ms": now // 1000 * 1000,
               "window_ms": 1000, "step_ms": 1000}  # fmt: skip
        control.produce(f"{prefix}.control", json.dumps(doc).encode(), sid.encode())
    for i in range(streams):  # one-minute windows from now, none due within the hour
        sid = f"scale-{i:06d}"
        doc = {"type": "upsert", "stream_id": sid, "start_ms": now, "window_ms": 60_000,
               "step_ms": 15_000, "delay_ms": HOUR_MS}  # fmt: skip
        control.produce(f"{prefix}.control", json.dumps(doc).encode(), sid.encode())
        if i % 10_000 == 0:
            control.poll(0)
    left = control.flush(60)
    if left:
        raise BenchTimeout(f"registration: {left} upserts not delivered within 60 s")


def rebuilds(proc: CoordinatorProcess) -> tuple[int, int]:
    """Rebuilds of the due-index in the coordinator's log so far: (done, voided by a rebalance).
    Each assignment is one rebuild, so more than one per start means the group rebalanced."""
    text = proc.log.read_text(errors="replace") if proc.log.exists() else ""
    return len(re.findall(r"indexed \d+ streams of partitions", text)), text.count(
        "voided by a rebalance"
    )


def rebuilds_since(proc: CoordinatorProcess, before: tuple[int, int]) -> str:
    done, voided = rebuilds(proc)
    return f"{done - before[0]} rebuilds, {voided - before[1]} voided"


def mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB"


def streams_list(proc: CoordinatorProcess, total: int, timeout_s: float) -> str:
    """Run `tidemark streams list --output json` (the first child this script waits for, so
    RUSAGE_CHILDREN's peak is its own) until it lists every stream; its time and peak RSS."""
    env = {**proc.env, "TIDEMARK_WEB_PORT": "0"}
    deadline = time.monotonic() + timeout_s
    while True:
        began = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "streams", "streams", "list", "--output", "json"],
            env=env, capture_output=True, check=False, timeout=timeout_s,
        )  # fmt: skip
        took = time.monotonic() - began
        shown = len(json.loads(done.stdout)) if done.returncode == 0 else 0
        if shown >= total:
            peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            return f"{took:,.1f} s, peak RSS {mib(peak_kib)}"
        if time.monotonic() > deadline:
            raise BenchTimeout(f"streams list showed {shown:,} of {total:,} streams")
        time.sleep(2)


def run_engine(
    kafka: KafkaSettings,
    engine: str,
    streams: int,
    probes: int,
    timeout_s: float,
    home: Path,
    page: str = "browser",
) -> dict[str, str]:
    """The phases above; `page` is "browser", "http" (no Chromium) or "" (no status page), and
    `page` ending in "-only" stops after the status page."""
    prefix = f"scale-{engine}-{uuid.uuid4().hex[:6]}"
    proc = coordinator(kafka, prefix, home, engine)
    data_dir = Path(proc.env["TIDEMARK_DATA_DIR"])
    total = streams + probes
    out: dict[str, str] = {}
    worker: AckWorker | None = None
    proc.start()
    try:
        wait_indexed(proc, 0, timeout_s, f"[{engine}] first start")
        check_engine(proc, engine)
        worker = AckWorker(kafka, prefix)
        worker.start()

        began = time.monotonic()
        register(kafka, prefix, streams, probes)
        wait_indexed(proc, total, timeout_s, f"[{engine}] registration")
        took = time.monotonic() - began
        out["registration"] = f"{took:,.1f} s ({total / took:,.0f} streams/s)"
        print(f"[{engine}] registered {total:,} streams in {out['registration']}", flush=True)
        time.sleep(3)
        assert proc.proc is not None
        rss = rss_kib(proc.proc.pid)
        out["RSS, all registered"] = f"{mib(rss['VmRSS'])} (peak {mib(rss['VmHWM'])})"
        print(f"[{engine}] RSS {out['RSS, all registered']}", flush=True)
        out["`tidemark streams list`, all shown"] = streams_list(proc, total, timeout_s)
        print(f"[{engine}] streams list: {out['`tidemark streams list`, all shown']}", flush=True)
        if page:
            home.mkdir(parents=True, exist_ok=True)
            out.update(status_page({**proc.env, "TIDEMARK_WEB_PORT": "0"}, prefix, total,
                                   timeout_s, home / "dashboard.log",
                                   browser=page.startswith("browser")))  # fmt: skip
            for name, value in out.items():
                if "status page" in name or name.startswith("/api/"):
                    print(f"[{engine}] {name}: {value}", flush=True)
            if page.endswith("-only"):
                return out

        out["rebuilds, registration"] = rebuilds_since(proc, (0, 0))

        # Restart on the same disk: a clean stop, then the first dispatch.
        proc.stop(30)
        before = rebuilds(proc)
        worker.arm()
        began = time.monotonic()
        proc.start()
        first = wait_first_dispatch(worker, proc, timeout_s) - began
        wait_indexed(proc, total, timeout_s, f"[{engine}] restart (same disk)")
        ready = time.monotonic() - began
        out["restart (same disk) -> first dispatch"] = f"{first:,.1f} s"
        out["restart (same disk) -> all indexed"] = f"{ready:,.1f} s"
        time.sleep(3)  # a rebalance storm would show within a session
        out["rebuilds, restart (same disk)"] = rebuilds_since(proc, before)
        print(f"[{engine}] restart, same disk: first dispatch after {first:,.1f} s, all "
              f"{total:,} indexed after {ready:,.1f} s", flush=True)  # fmt: skip

        # Lost disk: SIGKILL, delete the data folder, restore from the changelog.
        proc.kill()
        before = rebuilds(proc)
        shutil.rmtree(data_dir, ignore_errors=True)
        worker.arm()
        began = time.monotonic()
        proc.start()
        wait_indexed(proc, total, timeout_s, f"[{engine}] restore (lost disk)")
        ready = time.monotonic() - began
        first = wait_first_dispatch(worker, proc, timeout_s) - began
        rss = rss_kib(proc.proc.pid)
        out["lost disk -> ready, all indexed"] = f"{ready:,.1f} s"
        out["lost disk -> first dispatch"] = f"{first:,.1f} s"
        out["RSS after the restore"] = f"{mib(rss['VmRSS'])} (peak {mib(rss['VmHWM'])})"
        time.sleep(3)
        out["rebuilds, lost disk"] = rebuilds_since(proc, before)
        print(f"[{engine}] lost disk (SIGKILL, data folder deleted): ready with all {total:,} "
              f"indexed after {ready:,.1f} s, first dispatch after {first:,.1f} s; RSS "
              f"{out['RSS after the restore']}", flush=True)  # fmt: skip
        return out
    finally:
        if worker is not None:
            worker.stop()
        if proc.proc is not None and proc.proc.poll() is None:
            try:
                proc.stop(30)
            except AssertionError as exc:  # it ignored SIGTERM and was killed
                print(f"[{engine}] {exc}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["confluent", "faust", "both"], default="confluent")
    parser.add_argument("--streams", type=int, default=100_000)
    parser.add_argument("--probes", type=int, default=10, help="live 1 s streams, acked")
    parser.add_argument("--timeout", type=float, default=600, help="seconds, for each wait")
    parser.add_argument("--logs", type=Path, help="keep the coordinator's log in this folder")
    parser.add_argument(
        "--no-browser", action="store_true", help="the status page without Chromium"
    )
    parser.add_argument("--no-page", action="store_true", help="skip the status page")
    parser.add_argument("--skip-restarts", action="store_true", help="stop after the status page")
    args = parser.parse_args()
    page = "" if args.no_page else "http" if args.no_browser else "browser"
    if page and args.skip_restarts:
        page += "-only"
    machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
               f"Python {platform.python_version()}")  # fmt: skip
    print(f"machine: {machine}")
    note_engines()
    results: dict[str, dict[str, str]] = {}
    failed = False
    with tempfile.TemporaryDirectory() as tmp, broker_for_run(Path(tmp)) as kafka:
        home = args.logs or Path(tmp)
        for engine in engines_of(args.engine):
            try:
                where = home / f"scale-{engine}"
                results[engine] = run_engine(kafka, engine, args.streams, args.probes,
                                             args.timeout, where, page)  # fmt: skip
            except BenchTimeout as exc:
                print(f"[{engine}] stopped: {exc}", flush=True)
                failed = True
    if results:
        names = list(next(iter(results.values())))
        engines = list(results)
        print(f"\n{machine}; {args.streams:,} streams of 1 min (+{args.probes} live probes)\n")
        print("| figure | " + " | ".join(engines) + " |")
        print("|---|" + "---|" * len(engines))
        for name in names:
            print(f"| {name} | " + " | ".join(results[e].get(name, "-") for e in engines) + " |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
