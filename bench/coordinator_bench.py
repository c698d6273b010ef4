"""Coordinator benchmark on a real broker: throughput, ack-to-commit latency, dispatch delay.

    .venv/bin/python bench/coordinator_bench.py [--streams 2000] [--seconds 20]

Uses KAFKA_BOOTSTRAP_SERVERS if set, else starts a local broker (streams.devbroker) for the run.
Three phases, each printed as it finishes:
  1. baseline: a plain confluent-kafka consume -> produce loop over the same broker, with
     messages the size of results and tasks; the ceiling for any Kafka processor in Python here.
  2. throughput: one `tidemark coordinator` process, many streams with a backlog of windows, and
     a stand-in worker that acks every task at once; results per second the coordinator sustains.
  3. latency: live streams with 1 s windows (1,000 streams: about 1,000 results/s): dispatch delay
     (task received - window end) and ack-to-commit latency (commit received - ack sent).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streams.devbroker import ephemeral_broker  # noqa: E402
from streams.kafka.admin import TopicSpec, create_topics  # noqa: E402
from streams.kafka.settings import KafkaSettings  # noqa: E402
from tests.support.coordinator import CoordinatorProcess  # noqa: E402


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def consumer(kafka: KafkaSettings, topics: list[str], **extra: Any) -> Consumer:
    c = Consumer(kafka.librdkafka(**{
        "group.id": f"bench-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "fetch.wait.max.ms": 5, **extra}))  # fmt: skip
    c.subscribe(topics)
    return c


def result_value(task: dict[str, Any]) -> bytes:
    return json.dumps({"stream_id": task["stream_id"], "start_ms": task["start_ms"],
                       "end_ms": task["end_ms"], "attempt": task["attempt"], "outcome": "ack",
                       "ack_ms": task["end_ms"]}).encode()  # fmt: skip


def baseline(kafka: KafkaSettings, count: int) -> float:
    """Consume `count` result-sized messages and produce a task-sized one for each."""
    src, dst = f"bench-in-{uuid.uuid4().hex[:6]}", f"bench-out-{uuid.uuid4().hex[:6]}"
    create_topics(kafka, [TopicSpec(src, 6), TopicSpec(dst, 6)])
    producer = Producer(kafka.producer(**{"linger.ms": 5}))
    sample = {"task_id": "cluster-00001/1795968000000/1", "stream_id": "cluster-00001",
              "start_ms": 1795968000000, "end_ms": 1795968060000, "step_ms": 15000,
              "attempt": 1, "dispatched_ms": 1795968060001, "deadline_ms": 1795968120001,
              "params": {}}  # fmt: skip
    value = result_value(sample)
    for i in range(count):
        producer.produce(src, value, f"cluster-{i % 2000:05d}".encode())
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(30)
    c = consumer(kafka, [src])
    out = Producer(kafka.producer(**{"linger.ms": 5}))
    seen, began = 0, None
    while seen < count:
        for msg in c.consume(1000, 1.0):
            if msg.error():
                continue
            began = began or time.perf_counter()
            doc = json.loads(msg.value())
            out.produce(dst, json.dumps({**sample, "stream_id": doc["stream_id"]}).encode(),
                        msg.key())  # fmt: skip
            seen += 1
        out.poll(0)
    out.flush(30)
    elapsed = time.perf_counter() - (began or time.perf_counter())
    c.close()
    return count / elapsed


class Worker:
    """A stand-in worker that acks every task at once and records timings."""

    def __init__(self, kafka: KafkaSettings, prefix: str) -> None:
        self.tasks = consumer(kafka, [f"{prefix}.tasks"])
        self.producer = Producer(kafka.producer(**{"linger.ms": 1}))
        self.results_topic = f"{prefix}.results"
        self.acked = 0
        self.ack_sent: dict[tuple[str, int], int] = {}
        self.dispatch_delays: list[int] = []

    def step(self, timeout_s: float = 0.05, record: bool = False) -> None:
        for msg in self.tasks.consume(2000, timeout_s):
            if msg.error():
                continue
            task = json.loads(msg.value())
            received = now_ms()
            if record:
                self.dispatch_delays.append(received - task["end_ms"])
            self.producer.produce(self.results_topic, result_value(task), msg.key())
            if record:
                self.ack_sent[(task["stream_id"], task["end_ms"])] = now_ms()
            self.acked += 1
        self.producer.poll(0)


def run_coordinator_phases(
    kafka: KafkaSettings, streams: int, live_streams: int, seconds: float, home: Path
) -> float:
    prefix = f"bench-{uuid.uuid4().hex[:6]}"
    proc = CoordinatorProcess(kafka, prefix, home / "data", home / "coordinator.log",
                              partitions=6, flush_ms=200)  # fmt: skip
    proc.start()
    try:
        proc.wait_ready(90)
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
        warm_until = time.monotonic() + 5
        while time.monotonic() < warm_until:
            worker.step()
        began, acked0 = time.perf_counter(), worker.acked
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            worker.step()
        rate = (worker.acked - acked0) / (time.perf_counter() - began)
        print(f"coordinator: {rate:,.0f} results/s sustained over {seconds:g} s "
              f"({streams} streams catching up, 6 partitions, flush 200 ms)")  # fmt: skip
        stats = proc.health() or {}
        print(f"  coordinator stats: {stats.get('stats')}")
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

        # Latency: live streams with 1 s windows -> one result per stream and second.
        live_start = now_ms() // 1000 * 1000
        for i in range(live_streams):
            sid = f"live-{i:04d}"
            control.produce(f"{prefix}.control", json.dumps({
                "type": "upsert", "stream_id": sid, "start_ms": live_start,
                "window_ms": 1000, "step_ms": 1000}).encode(), sid.encode())  # fmt: skip
        control.flush(30)
        commits = consumer(kafka, [f"{prefix}.commits"])
        latencies: list[int] = []
        measure_from = time.monotonic() + 3
        end = measure_from + seconds
        acked_at_start = None
        while time.monotonic() < end:
            recording = time.monotonic() >= measure_from
            if recording and acked_at_start is None:
                acked_at_start, t0 = worker.acked, time.perf_counter()
            worker.step(0.005, record=recording)
            for msg in commits.consume(2000, 0.005):
                if msg.error():
                    continue
                got = now_ms()
                doc = json.loads(msg.value())
                for w in doc["windows"]:
                    sent = worker.ack_sent.pop((doc["stream_id"], w["end_ms"]), None)
                    if sent is not None:
                        latencies.append(got - sent)
        live_rate = (worker.acked - (acked_at_start or 0)) / (time.perf_counter() - t0)
        print(f"latency at {live_rate:,.0f} results/s ({live_streams:,} live streams of 1 s): "
              f"ack-to-commit p50 {pct(latencies, 0.5):.0f} ms, p99 {pct(latencies, 0.99):.0f} "
              f"ms ({len(latencies)} samples); dispatch delay p50 "
              f"{pct(worker.dispatch_delays, 0.5):.0f} ms, p99 "
              f"{pct(worker.dispatch_delays, 0.99):.0f} ms")  # fmt: skip
        commits.close()
        worker.tasks.close()
        return rate
    finally:
        proc.stop(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=2000, help="catching-up streams")
    parser.add_argument("--live-streams", type=int, default=1000, help="1 s windows, live")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--baseline-messages", type=int, default=100_000)
    parser.add_argument("--logs", type=Path, help="keep the coordinator's log in this folder")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")  # fmt: skip
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
        if not bootstrap:
            broker = ephemeral_broker(Path(tmp) / "kafka")
            broker.start()
            stack.callback(broker.stop)
            bootstrap = broker.bootstrap_servers
        kafka = KafkaSettings(bootstrap)
        base = baseline(kafka, args.baseline_messages)
        print(f"baseline: {base:,.0f} msgs/s plain confluent-kafka consume->produce")
        home = args.logs or Path(tmp)
        home.mkdir(parents=True, exist_ok=True)
        rate = run_coordinator_phases(kafka, args.streams, args.live_streams, args.seconds, home)
        print(f"coordinator / baseline: {rate / base:.1%}")


if __name__ == "__main__":
    main()
