"""What the benchmarks share: a broker for the run, read_committed consumers, a stand-in
worker and a commits reader, the coordinator process per engine, percentiles and RSS."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from streams.dev.broker import ephemeral_broker  # noqa: E402
from streams.kafka.settings import KafkaSettings  # noqa: E402
from tests.support.coordinator import CoordinatorProcess  # noqa: E402

ENGINES = ("confluent", "faust")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def pct(values: list[float] | list[int], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def engines_of(choice: str) -> list[str]:
    return list(ENGINES) if choice == "both" else [choice]


@contextmanager
def broker_for_run(tmp: Path) -> Iterator[KafkaSettings]:
    """KAFKA_BOOTSTRAP_SERVERS if set, else a local broker of our own, stopped at the end."""
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if bootstrap:
        yield KafkaSettings(bootstrap)
        return
    broker = ephemeral_broker(_broker_home(tmp), quick_start=False)  # the full JIT and G1
    print("starting a local broker (streams.dev.broker) for this run ...", flush=True)
    broker.start()
    try:
        yield KafkaSettings(broker.bootstrap_servers)
    finally:
        broker.stop()


def broker_pid(tmp: Path) -> int | None:
    """The pid of the broker that `broker_for_run(tmp)` started; None when the run uses
    KAFKA_BOOTSTRAP_SERVERS (a broker that may not even be on this machine)."""
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        return None
    return ephemeral_broker(_broker_home(tmp)).running_pid()  # reads only its home's pid file


def _broker_home(tmp: Path) -> Path:
    return tmp / "kafka"


def consumer(kafka: KafkaSettings, topics: list[str], **extra: Any) -> Consumer:
    """A consumer of its own group, subscribed to `topics` from the earliest offset (none: the
    caller assigns); read_committed always, since the confluent engine's outputs become visible
    only when its transaction commits."""
    c = Consumer(kafka.librdkafka(**{
        "group.id": f"bench-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "fetch.wait.max.ms": 5,
        "isolation.level": "read_committed", **extra}))  # fmt: skip
    if topics:
        c.subscribe(topics)
    return c


def result_value(task: dict[str, Any]) -> bytes:
    return orjson.dumps({"stream_id": task["stream_id"], "start_ms": task["start_ms"],
                         "end_ms": task["end_ms"], "attempt": task["attempt"], "outcome": "ack",
                         "ack_ms": task["end_ms"]})  # fmt: skip


class Worker:
    """A stand-in worker that acks every task at once and records timings.

    It shares the machine's two cores with the broker and the coordinator under test, so it
    does as little as it can per task: orjson, not json, whose decode of a task and encode of
    its ack took 14 to 17 µs against orjson's 3 (timeit, 2026-12-01 19:58), CPU that the
    coordinator then had to share."""

    def __init__(self, kafka: KafkaSettings, prefix: str) -> None:
        self.tasks = consumer(kafka, [f"{prefix}.tasks"])
        self.producer = Producer(kafka.producer(**{"linger.ms": 1}))
        self.results_topic = f"{prefix}.results"
        self.acked = 0
        self.ack_sent: dict[tuple[str, int], int] = {}
        self.dispatch_delays: list[int] = []

    def step(self, timeout_s: float = 0.05, record: bool = False) -> int:
        got = 0
        for msg in self.tasks.consume(2000, timeout_s):
            if msg.error():
                continue
            task = orjson.loads(msg.value())
            received = now_ms()
            self.on_task(task, received)
            if record:
                self.dispatch_delays.append(received - task["end_ms"])
            self.producer.produce(self.results_topic, result_value(task), msg.key())
            if record:
                self.ack_sent[(task["stream_id"], task["end_ms"])] = now_ms()
            self.acked += 1
            got += 1
        self.producer.poll(0)
        return got

    def on_task(self, task: dict[str, Any], received_ms: int) -> None:
        """Hook for subclasses."""

    def close(self) -> None:
        self.producer.flush(10)
        self.tasks.close()


class CommitReader:
    """Reads `commits` (read_committed) on a thread of its own and notes when each window of
    the streams whose id starts with `prefix` was committed. On the stand-in worker's loop, a
    commit waited for that loop's own poll of tasks (up to 5 ms, then up to 5 more for its
    own), which counted as the coordinator's.

    It reads from where the topic ends when it is made: from the earliest offset it first read
    the throughput phase's half a million commits (5.6 s for 500,000 on an idle machine), CPU
    taken from the pipeline during the latency phase's first seconds."""

    def __init__(self, kafka: KafkaSettings, topic: str, prefix: str) -> None:
        self._consumer = consumer(kafka, [])
        partitions = self._consumer.list_topics(topic, timeout=10).topics[topic].partitions
        self._consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in partitions])
        self._prefix = prefix.encode()
        self.received: list[tuple[str, int, int]] = []  # (stream_id, end_ms, received_ms)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="commits-reader", daemon=True)

    def start(self) -> CommitReader:
        self._thread.start()
        return self

    def _run(self) -> None:
        note = self.received.append
        while not self._stop.is_set():
            # poll, not consume: a batch consume returns only once its batch is full or at its
            # timeout, which would stamp a commit up to that timeout late.
            msg = self._consumer.poll(0.05)
            if msg is None or msg.error() or not (msg.key() or b"").startswith(self._prefix):
                continue  # nothing yet, or the throughput phase's streams
            got = now_ms()
            doc = orjson.loads(msg.value())
            for w in doc["windows"]:
                note((doc["stream_id"], w["end_ms"], got))

    def stop(self) -> list[tuple[str, int, int]]:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()
        return self.received


def coordinator_knows_engines() -> bool:
    """Whether this checkout's `tidemark coordinator` has --engine (until it lands, it runs
    Faust whatever TIDEMARK_ENGINE says)."""
    done = subprocess.run(
        [sys.executable, "-m", "streams", "coordinator", "--help"],
        capture_output=True, text=True, check=False, timeout=60, cwd=ROOT,
    )  # fmt: skip
    return "--engine" in done.stdout


def note_engines() -> None:
    if not coordinator_knows_engines():
        print(
            "note: this checkout's `tidemark coordinator` has no --engine yet: every engine "
            "below runs the Faust coordinator (TIDEMARK_ENGINE is passed and ignored)"
        )


def coordinator(
    kafka: KafkaSettings, prefix: str, home: Path, engine: str, flush_ms: int = 200
) -> CoordinatorProcess:
    """A `tidemark coordinator` (6 partitions) of `engine`, with its data and log in `home`."""
    home.mkdir(parents=True, exist_ok=True)
    proc = CoordinatorProcess(kafka, prefix, home / "data", home / "coordinator.log",
                              partitions=6, flush_ms=flush_ms)  # fmt: skip
    proc.env["TIDEMARK_ENGINE"] = engine
    return proc


def check_engine(proc: CoordinatorProcess, engine: str) -> None:
    """Say so when /health names another engine than the one asked for (Faust's names none)."""
    doc = proc.health() or {}
    running = doc.get("engine", "faust")
    if running != engine:
        print(f"warning: asked for the {engine} engine, /health says {running}", flush=True)


def rss_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, in KiB, from /proc/<pid>/status."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(rest.split()[0])
    return out


def own_rss_mib() -> float:
    """This process's VmRSS in MiB."""
    return rss_kib(os.getpid())["VmRSS"] / 1024
