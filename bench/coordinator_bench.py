"""Coordinator benchmark on a real broker, beside its peers: throughput, ack-to-commit latency,
dispatch delay.

    .venv/bin/python bench/coordinator_bench.py [--engine confluent|faust|both] [--streams 2000]
        [--live-streams 1000] [--seconds 20] [--quix-events 200000] [--no-quix]
        [--throughput-only] [--root DIR] [--baseline-messages 0]

`--root DIR` runs the coordinator from another checkout's `streams` (put first on its
PYTHONPATH), the bench itself from this one: a before/after of the engine with the same bench,
e.g. `git archive <commit> streams | tar -x -C /tmp/base`, then `--root /tmp/base`.

Uses KAFKA_BOOTSTRAP_SERVERS if set, else starts a local broker (streams.dev.broker) for the run.
Everything runs in one run on one broker, each phase printed as it finishes, a table at the end:
  1. baseline: a plain confluent-kafka consume -> produce loop over the same broker, with
     messages the size of results and tasks; the ceiling for any Kafka processor in Python here.
  2. quix: a Quix Streams app with processing_guarantee="exactly-once" doing the minimum work per
     event (read a key's JSON state, update it, emit one message), over 2,000 keys in 6
     partitions (bench/quix_peer.py, run from its own virtualenv .bench/quix-venv, which this
     script installs: Quix's pins conflict with ours); events/s from its first visible output to
     its last, read_committed.
  3. per engine (TIDEMARK_ENGINE in the coordinator's environment), one `tidemark coordinator`:
     a. throughput: many streams with a backlog of windows, and a stand-in worker that acks
        every task at once; results per second the coordinator sustains.
     b. latency: live streams with 1 s windows (1,000 streams: about 1,000 results/s): dispatch
        delay (task received - window end) and ack-to-commit latency (commit received - ack sent).
        Each second's thousand acks share a transaction, so the p99 is the worst second or two:
        the five slowest seconds are printed with their own p50 and p99.
Every reader of the coordinator's outputs (the stand-in worker, the commits reader) consumes with
isolation.level=read_committed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from common import (
    ROOT,
    CommitReader,
    Worker,
    broker_for_run,
    broker_pid,
    check_engine,
    consumer,
    coordinator,
    engines_of,
    note_engines,
    now_ms,
    pct,
    result_value,
)
from confluent_kafka import Producer

from streams.kafka.admin import create_topics
from streams.kafka.settings import KafkaSettings
from streams.topics import TopicSpec

QUIX_VERSION = "3.28.1"  # the newest 3.x PyPI served on 2026-11-30 (`pip index versions`)
QUIX_VENV = ROOT / ".bench" / "quix-venv"
QUIX_KEYS = 2000
SAMPLE_TASK = {"task_id": "cluster-00001/1795968000000/1", "stream_id": "cluster-00001",
               "start_ms": 1795968000000, "end_ms": 1795968060000, "step_ms": 15000,
               "attempt": 1, "dispatched_ms": 1795968060001, "deadline_ms": 1795968120001,
               "params": {}}  # fmt: skip


def prefill(kafka: KafkaSettings, topic: str, count: int, keys: int = QUIX_KEYS) -> None:
    """`count` result-sized messages over `keys` stream keys (murmur2, as Java clients do)."""
    producer = Producer(kafka.producer(**{"linger.ms": 5}))
    for i in range(count):
        sid = f"cluster-{i % keys:05d}"
        window = {**SAMPLE_TASK, "stream_id": sid, "end_ms": SAMPLE_TASK["end_ms"] + i}
        value = result_value(window)
        while True:
            try:
                producer.produce(topic, value, sid.encode())
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        if i % 10000 == 0:
            producer.poll(0)
    if producer.flush(60):
        raise RuntimeError(f"prefill: {len(producer)} messages not delivered to {topic} in 60 s")


def baseline(kafka: KafkaSettings, count: int) -> float:
    """Consume `count` result-sized messages and produce a task-sized one for each."""
    src, dst = f"bench-in-{uuid.uuid4().hex[:6]}", f"bench-out-{uuid.uuid4().hex[:6]}"
    create_topics(kafka, [TopicSpec(src, 6), TopicSpec(dst, 6)])
    prefill(kafka, src, count)
    c = consumer(kafka, [src])
    out = Producer(kafka.producer(**{"linger.ms": 5}))
    seen, began = 0, None
    deadline = time.monotonic() + 120
    while seen < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"baseline: {seen} of {count} messages read in 120 s")
        for msg in c.consume(1000, 1.0):
            if msg.error():
                continue
            began = began or time.perf_counter()
            doc = json.loads(msg.value())
            out.produce(dst, json.dumps({**SAMPLE_TASK, "stream_id": doc["stream_id"]}).encode(),
                        msg.key())  # fmt: skip
            seen += 1
        out.poll(0)
    out.flush(30)
    elapsed = time.perf_counter() - (began or time.perf_counter())
    c.close()
    return count / elapsed


# -- the Quix Streams peer -----------------------------------------------------------------


def quix_python() -> Path:
    """The Python of .bench/quix-venv with quixstreams==QUIX_VERSION, installed if missing.

    Its own virtualenv because its pins conflict with ours (quixstreams 3.28 wants
    confluent-kafka<2.13 and pydantic<2.14; we pin 2.16.1 and 2.14.4): printed below."""
    python = QUIX_VENV / "bin" / "python"
    probe = [str(python), "-c", "import quixstreams; print(quixstreams.__version__)"]
    have = (
        subprocess.run(probe, capture_output=True, text=True, check=False)
        if python.exists()
        else None
    )
    if have is None or have.returncode != 0 or have.stdout.strip() != QUIX_VERSION:
        print(f"installing quixstreams=={QUIX_VERSION} into {QUIX_VENV} ...", flush=True)
        if QUIX_VENV.exists():
            shutil.rmtree(QUIX_VENV)
        QUIX_VENV.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(QUIX_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        f"quixstreams=={QUIX_VERSION}"], check=True, timeout=600)  # fmt: skip
    conflicts = quix_conflicts(python)
    if conflicts:
        print(f"  quixstreams {QUIX_VERSION} pins that conflict with ours: {'; '.join(conflicts)}")
    return python


def quix_conflicts(python: Path) -> list[str]:
    """quixstreams's requirements that the versions installed in our own venv do not meet."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import Requirement

    done = subprocess.run(
        [str(python), "-c",
         "import importlib.metadata as m; print('\\n'.join(m.requires('quixstreams') or []))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    out = []
    for line in done.stdout.splitlines():
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # an optional extra
        try:
            ours = version(req.name)
        except PackageNotFoundError:
            continue
        if not req.specifier.contains(ours, prereleases=True):
            out.append(f"{req.name}{req.specifier} (ours {ours})")
    return out


def quix_peer(kafka: KafkaSettings, events: int, home: Path, commit_interval: float) -> float:
    """Events/s of the Quix Streams exactly-once peer over a pre-filled input topic."""
    python = quix_python()
    tag = uuid.uuid4().hex[:6]
    src, dst = f"bench-quix-in-{tag}", f"bench-quix-out-{tag}"
    create_topics(kafka, [TopicSpec(src, 6), TopicSpec(dst, 6)])
    prefill(kafka, src, events)
    log, stamp = home / "quix-peer.log", home / f"quix-first-event-{tag}"
    out = consumer(kafka, [dst])
    with open(log, "ab") as sink:
        proc = subprocess.Popen(
            [str(python), str(ROOT / "bench" / "quix_peer.py"), "--bootstrap",
             kafka.bootstrap_servers, "--input", src, "--output", dst, "--group", f"quix-{tag}",
             "--state-dir", str(home / "quix-state"), "--events", str(events),
             "--commit-interval", str(commit_interval), "--max-seconds", "300",
             "--stamp-file", str(stamp)],
            stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
        )  # fmt: skip
    try:
        seen = 0
        deadline = time.monotonic() + 300
        while seen < events:
            if time.monotonic() > deadline or (proc.poll() is not None and proc.returncode):
                tail = log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"quix peer: {seen} of {events} outputs visible; log:\n{tail}")
            seen += sum(1 for m in out.consume(5000, 0.2) if not m.error())
        # From the first event Quix processed to the last output visible (read_committed):
        # outputs become visible per transaction, so this includes its commits.
        elapsed = time.time() - float(stamp.read_text())
        rate = events / elapsed
        proc.wait(60)
        return rate
    finally:
        out.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


# -- the coordinator, per engine -----------------------------------------------------------


def run_coordinator_phases(
    kafka: KafkaSettings,
    engine: str,
    streams: int,
    live_streams: int,
    seconds: float,
    home: Path,
    broker_pid: int | None = None,
    latency: bool = True,
    root: Path | None = None,
) -> dict[str, float]:
    """Throughput, then (unless `latency` is False) latency; `broker_pid` (a broker of this
    run) adds its CPU per result; `root` runs the coordinator from that checkout."""
    prefix = f"bench-{engine}-{uuid.uuid4().hex[:6]}"
    proc = coordinator(kafka, prefix, home, engine)
    if root is not None:
        # `python -m` imports from its working directory first: PYTHONPATH alone would run
        # this checkout's `streams` when the bench is started from it.
        proc.env["PYTHONPATH"] = str(root)
        proc.cwd = root
    proc.start()
    figures: dict[str, float] = {}
    try:
        proc.wait_ready(90)
        check_engine(proc, engine)
        control = Producer(kafka.producer())
        start = now_ms() // 60000 * 60000 - 10_000 * 60000  # a backlog of 10,000 windows each
        for i in range(streams):
            sid = f"cluster-{i:05d}"
            control.produce(
                f"{prefix}.control",
                json.dumps({"type": "upsert", "stream_id": sid, "start_ms": start}).encode(),
                sid.encode(),
            )
        control.flush(30)
        worker = Worker(kafka, prefix)
        warm_until = time.monotonic() + min(5.0, seconds)
        while time.monotonic() < warm_until:
            worker.step()
        assert proc.proc is not None
        began, acked0, cpu0 = time.perf_counter(), worker.acked, cpu_s(proc.proc.pid)
        own0, broker0 = time.process_time(), cpu_s(broker_pid) if broker_pid else 0.0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            worker.step()
        acked = worker.acked - acked0
        rate = acked / (time.perf_counter() - began)
        figures["throughput"] = rate
        # CPU per result moves much less with what else runs than results/s does.
        per_result = 1e6 / max(1, acked)
        figures["cpu_us"] = (cpu_s(proc.proc.pid) - cpu0) * per_result
        # This process is the stand-in worker (all its threads: librdkafka's too).
        figures["worker_cpu_us"] = (time.process_time() - own0) * per_result
        print(
            f"[{engine}] coordinator: {rate:,.0f} results/s sustained over {seconds:g} s "
            f"({streams} streams catching up, 6 partitions, flush 200 ms); its CPU "
            f"{figures['cpu_us']:.0f} µs per result (all threads)",
            flush=True,
        )
        if broker_pid:
            figures["broker_cpu_us"] = (cpu_s(broker_pid) - broker0) * per_result
            total_us = figures["cpu_us"] + figures["broker_cpu_us"] + figures["worker_cpu_us"]
            cores = os.cpu_count() or 1
            print(
                f"[{engine}]   CPU per result: broker {figures['broker_cpu_us']:.0f} µs, "
                f"stand-in worker {figures['worker_cpu_us']:.0f} µs, coordinator "
                f"{figures['cpu_us']:.0f} µs; {total_us:.0f} µs in all, so "
                f"{cores} cores carry at most {cores * 1e6 / total_us:,.0f} "
                "results/s of this pipeline",
                flush=True,
            )
        stats = proc.health() or {}
        print(f"[{engine}]   coordinator stats: {stats.get('stats')}")
        for i in range(streams):  # stop the backlog streams before the latency phase
            sid = f"cluster-{i:05d}"
            control.produce(
                f"{prefix}.control",
                json.dumps({"type": "delete", "stream_id": sid}).encode(),
                sid.encode(),
            )
        control.flush(30)
        drain_until = time.monotonic() + 3
        while time.monotonic() < drain_until:
            worker.step()
        if not latency:
            worker.close()
            return figures

        # Latency: live streams with 1 s windows -> one result per stream and second.
        live_start = now_ms() // 1000 * 1000
        for i in range(live_streams):
            sid = f"live-{i:04d}"
            control.produce(f"{prefix}.control", json.dumps({
                "type": "upsert", "stream_id": sid, "start_ms": live_start,
                "window_ms": 1000, "step_ms": 1000}).encode(), sid.encode())  # fmt: skip
        control.flush(30)
        commits = CommitReader(kafka, f"{prefix}.commits", "live-").start()
        measure_from = time.monotonic() + 3
        end = measure_from + seconds
        acked_at_start, t0 = None, time.perf_counter()
        # This process timestamps each ack and each commit it reads, so a stall of its own
        # would show as latency: its (main loop's) longest iteration says whether one happened.
        longest_s, last = 0.0, time.monotonic()
        while time.monotonic() < end:
            longest_s, last = max(longest_s, time.monotonic() - last), time.monotonic()
            recording = time.monotonic() >= measure_from
            if recording and acked_at_start is None:
                acked_at_start, t0 = worker.acked, time.perf_counter()
            worker.step(0.005, record=recording)
        live_rate = (worker.acked - (acked_at_start or 0)) / (time.perf_counter() - t0)
        by_second: dict[int, list[int]] = {}
        for stream_id, end_ms, got in commits.stop():
            if (sent := worker.ack_sent.get((stream_id, end_ms))) is not None:
                by_second.setdefault(end_ms, []).append(got - sent)
        latencies = [latency for second in by_second.values() for latency in second]
        figures |= {
            "live_streams": live_streams, "live_rate": live_rate, "samples": len(latencies),
            "a2c_p50": pct(latencies, 0.5), "a2c_p99": pct(latencies, 0.99),
            "dispatch_p50": pct(worker.dispatch_delays, 0.5),
            "dispatch_p99": pct(worker.dispatch_delays, 0.99),
        }  # fmt: skip
        print(f"[{engine}] latency at {live_rate:,.0f} results/s ({live_streams:,} live streams "
              f"of 1 s): ack-to-commit p50 {figures['a2c_p50']:.0f} ms, p99 "
              f"{figures['a2c_p99']:.0f} ms ({len(latencies)} samples); dispatch delay p50 "
              f"{figures['dispatch_p50']:.0f} ms, p99 {figures['dispatch_p99']:.0f} ms; "
              f"the bench's own longest iteration {longest_s * 1000:.0f} ms",
              flush=True)  # fmt: skip
        # A second's thousand acks share one transaction, so the p99 is decided by the worst
        # one or two seconds: show them, and whether a second's own median was slow too, with
        # their time of day to set beside `vmstat -t 1` (the kernel's writeback of the
        # throughput phase's data has coincided with them: docs/benchmarks.md, twelfth pass).
        worst = sorted(by_second.items(), key=lambda item: -pct(item[1], 0.99))[:5]
        seconds_shown = ", ".join(
            f"+{(end_ms - live_start) / 1000:.0f} s "
            f"({time.strftime('%H:%M:%S', time.gmtime(end_ms / 1000))} UTC) "
            f"{pct(values, 0.5):.0f}/{pct(values, 0.99):.0f} ms"
            for end_ms, values in worst
        )
        print(f"[{engine}]   the slowest seconds, p50/p99 of their acks: {seconds_shown}",
              flush=True)  # fmt: skip
        worker.close()
        return figures
    finally:
        proc.stop(30)


def cpu_s(pid: int) -> float:
    """CPU seconds a process has used so far, user and system, all threads (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def table(rows: list[tuple[str, str]]) -> str:
    width = max(len(r[0]) for r in rows)
    lines = [f"| {'figure':<{width}} | result |", f"|{'-' * (width + 2)}|--------|"]
    lines += [f"| {name:<{width}} | {value} |" for name, value in rows]
    return "\n".join(lines)


def of_baseline(rate: float, base: float | None) -> str:
    """` (x% of the baseline)`, or nothing when the baseline was not run."""
    return "" if base is None else f" ({rate / base:.1%} of the baseline)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["confluent", "faust", "both"], default="both")
    parser.add_argument("--streams", type=int, default=2000, help="catching-up streams")
    parser.add_argument("--live-streams", type=int, default=1000, help="1 s windows, live")
    parser.add_argument("--seconds", type=float, default=20, help="each measured phase")
    parser.add_argument("--baseline-messages", type=int, default=100_000)
    parser.add_argument("--quix-events", type=int, default=200_000)
    parser.add_argument("--quix-commit-interval", type=float, default=5.0, help="Quix's default")
    parser.add_argument("--no-quix", action="store_true", help="skip the Quix Streams peer")
    parser.add_argument("--logs", type=Path, help="keep the processes' logs in this folder")
    parser.add_argument("--throughput-only", action="store_true", help="skip the latency phase")
    parser.add_argument("--root", type=Path, help="run the coordinator from this checkout")
    args = parser.parse_args()
    machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
               f"Python {platform.python_version()}")  # fmt: skip
    print(f"machine: {machine}")
    engines = engines_of(args.engine)
    note_engines()
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp, broker_for_run(Path(tmp)) as kafka:
        home = args.logs or Path(tmp)
        home.mkdir(parents=True, exist_ok=True)
        base = baseline(kafka, args.baseline_messages) if args.baseline_messages else None
        measured = "not run (--baseline-messages 0)" if base is None else f"{base:,.0f} msgs/s"
        print(f"baseline: {measured}, plain confluent-kafka consume->produce", flush=True)
        rows.append(("baseline, confluent-kafka consume -> produce", measured))
        if not args.no_quix:
            try:
                quix = quix_peer(kafka, args.quix_events, home, args.quix_commit_interval)
                print(
                    f"quix: {quix:,.0f} events/s, Quix Streams {QUIX_VERSION} exactly-once, "
                    f"{args.quix_events:,} events over {QUIX_KEYS:,} keys",
                    flush=True,
                )
                rows.append(
                    (
                        f"Quix Streams {QUIX_VERSION}, exactly-once, minimum work",
                        f"{quix:,.0f} events/s{of_baseline(quix, base)}",
                    )
                )
            except Exception as exc:  # the peer failing must not lose the other figures
                print(f"quix: failed: {exc}", flush=True)
                rows.append((f"Quix Streams {QUIX_VERSION}, exactly-once", "failed (see above)"))
        for engine in engines:
            try:
                f = run_coordinator_phases(kafka, engine, args.streams, args.live_streams,
                                           args.seconds, home / engine, broker_pid(Path(tmp)),
                                           not args.throughput_only, args.root)  # fmt: skip
            except Exception as exc:
                print(f"[{engine}] failed: {exc}", flush=True)
                rows.append((f"{engine}: coordinator", "failed (see above)"))
                continue
            cpu = f"coordinator CPU {f['cpu_us']:,.0f} µs per result"
            if "broker_cpu_us" in f:
                cpu += (f", broker {f['broker_cpu_us']:,.0f} µs, stand-in worker "
                        f"{f['worker_cpu_us']:,.0f} µs")  # fmt: skip
            rows.append((f"{engine}: sustained, {args.streams:,} streams catching up",
                         f"{f['throughput']:,.0f} results/s{of_baseline(f['throughput'], base)}; "
                         f"{cpu}"))  # fmt: skip
            if args.throughput_only:
                continue
            rows.append((f"{engine}: {args.live_streams:,} live streams of 1 s "
                         f"({f['live_rate']:,.0f} results/s)",
                         f"ack-to-commit p50 {f['a2c_p50']:,.0f} ms, p99 {f['a2c_p99']:,.0f} ms; "
                         f"dispatch delay p50 {f['dispatch_p50']:,.0f} ms, p99 "
                         f"{f['dispatch_p99']:,.0f} ms"))  # fmt: skip
    print(f"\n{machine}; {args.seconds:g} s per measured phase\n")
    print(table(rows))


if __name__ == "__main__":
    main()
