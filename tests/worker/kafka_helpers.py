"""Helpers for worker tests on the real broker: send tasks, read results, read commits."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from streams.clock import now_ms as clock_ms
from streams.kafka.admin import create_topics
from streams.kafka.settings import KafkaSettings
from streams.pipelines.synthetic import SyntheticPipeline
from streams.topics import TopicSpec
from streams.wire import encode_task, stream_key
from streams.worker.api import Ack, Outcome, Task
from streams.worker.config import WorkerConfig
from streams.worker.runner import kafka_runtime
from streams.worker.runtime import WorkerRuntime

PARTITIONS = 3


def wait_until(condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll ``condition`` until it is truthy; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.05)


def make_task(
    stream_id: str,
    n: int = 0,
    *,
    now_ms: int | None = None,
    end_in_ms: int = -1_000,
    timeout_ms: int = 30_000,
    params: dict[str, Any] | None = None,
) -> Task:
    """A task whose window ends ``end_in_ms`` (+ ``n``) from now, due ``timeout_ms`` from now.

    ``n`` keeps the windows of one stream apart, as results are told apart by ``end_ms``.
    """
    now = clock_ms() if now_ms is None else now_ms
    end_ms = now + end_in_ms + n
    return Task(
        task_id=f"{stream_id}/{n}/{uuid.uuid4().hex[:6]}",
        stream_id=stream_id,
        start_ms=end_ms - 60_000,
        end_ms=end_ms,
        step_ms=15_000,
        attempt=1,
        dispatched_ms=now,
        deadline_ms=now + timeout_ms,
        params=params or {},
    )


def send(
    kafka: KafkaSettings,
    topic: str,
    *values: Task | bytes,
    key: bytes = b"k",
    flush_s: float = 10.0,
) -> list:
    """Produce tasks (keyed by stream id) or raw values; return their (partition, offset)."""
    producer = Producer(kafka.producer())
    placed: list[tuple[int, int] | None] = [None] * len(values)

    def report(i: int) -> Callable[[Any, Any], None]:
        def delivered(err: Any, msg: Any) -> None:
            assert err is None, err
            placed[i] = (msg.partition(), msg.offset())

        return delivered

    for i, value in enumerate(values):
        if isinstance(value, Task):
            body = encode_task(value)
            producer.produce(topic, body, stream_key(value.stream_id), on_delivery=report(i))
        else:
            producer.produce(topic, value, key, on_delivery=report(i))
        producer.flush(flush_s)  # one at a time: the order of offsets is the order given
    assert all(placed), placed
    return placed


class ResultReader:
    """Reads every partition of a results topic from the beginning, without a group."""

    def __init__(self, kafka: KafkaSettings, topic: str) -> None:
        self._consumer = Consumer(
            kafka.librdkafka(**{"group.id": f"reader-{uuid.uuid4().hex}", "log_level": 3})
        )
        self._consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)]
        )
        self.results: list[tuple[bytes, dict[str, Any]]] = []

    def read(self) -> list[tuple[bytes, dict[str, Any]]]:
        """Everything read so far, after a short poll for more."""
        for msg in self._consumer.consume(100, timeout=0.1):
            if msg.error() is None:
                self.results.append((msg.key(), json.loads(msg.value())))
        return self.results

    def values(self, outcome: str | None = None) -> list[dict[str, Any]]:
        return [v for _, v in self.read() if outcome is None or v["outcome"] == outcome]

    def wait_for(
        self, what: str, match: Callable[[dict[str, Any]], bool], count: int = 1, timeout_s=20.0
    ) -> list[dict[str, Any]]:
        """Wait until ``count`` results match; return them."""

        def found() -> list[dict[str, Any]]:
            hits = [v for v in self.values() if match(v)]
            return hits if len(hits) >= count else []

        return wait_until(found, timeout_s, what)  # type: ignore[no-any-return]

    def close(self) -> None:
        self._consumer.close()


def for_task(task: Task, outcome: str) -> Callable[[dict[str, Any]], bool]:
    return lambda v: (
        v["end_ms"] == task.end_ms
        and v["stream_id"] == task.stream_id
        and (v["outcome"] == outcome)
    )


def committed(kafka: KafkaSettings, group: str, topic: str) -> dict[int, int]:
    """The group's committed offset per partition (partitions without a commit left out)."""
    consumer = Consumer(kafka.librdkafka(**{"group.id": group}))
    try:
        offsets = consumer.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10
        )
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in offsets if tp.offset >= 0}


class GatedHandler:
    """A handler whose calls block until the test opens their gate (by task id, or all)."""

    def __init__(self, outcome: Callable[[Task], Outcome] = lambda t: Ack(t.end_ms)) -> None:
        self._outcome = outcome
        self._gates: defaultdict[str, threading.Event] = defaultdict(threading.Event)
        self._lock = threading.Lock()
        self._all = threading.Event()
        self.started: dict[str, int] = {}  # task_id -> wall clock ms at start
        self.returned: list[str] = []

    def __call__(self, task: Task) -> Outcome:
        with self._lock:
            self.started[task.task_id] = clock_ms()
            gate = self._gates[task.task_id]
        deadline = time.monotonic() + 30
        while not (gate.is_set() or self._all.is_set()) and time.monotonic() < deadline:
            gate.wait(0.05)
        with self._lock:
            self.returned.append(task.task_id)
        return self._outcome(task)

    def open(self, *tasks: Task) -> None:
        with self._lock:
            for task in tasks:
                self._gates[task.task_id].set()

    def open_all(self) -> None:
        self._all.set()

    def running(self) -> set[str]:
        with self._lock:
            return set(self.started) - set(self.returned)


class AsyncGatedHandler(GatedHandler):
    """A ``GatedHandler`` declared ``async``: its calls wait on the worker's event loop, not
    on a thread, so that the same broker tests run for both kinds of handler."""

    async def __call__(self, task: Task) -> Outcome:  # type: ignore[override]
        with self._lock:
            self.started[task.task_id] = clock_ms()
            gate = self._gates[task.task_id]
        deadline = time.monotonic() + 30
        while not (gate.is_set() or self._all.is_set()) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        with self._lock:
            self.returned.append(task.task_id)
        return self._outcome(task)


@contextmanager
def running(runtime: WorkerRuntime, *handlers: GatedHandler) -> Iterator[WorkerRuntime]:
    """Run ``runtime`` in its thread; stop it, open every gate and join it on the way out."""
    runtime.start()
    try:
        yield runtime
    finally:
        runtime.stop()
        for handler in handlers:
            handler.open_all()
        assert runtime.join(30), "the runtime did not stop"


@contextmanager
def synthetic_worker(
    kafka: KafkaSettings, prefix: str
) -> Iterator[tuple[WorkerRuntime, ResultReader]]:
    """A worker on the synthetic pipeline (10 ms a task, 2 at once) over `prefix`'s tasks and
    results topics, made here, and a reader of its results; both stopped on exit."""
    tasks, results = f"{prefix}.tasks", f"{prefix}.results"
    create_topics(kafka, [TopicSpec(tasks, PARTITIONS), TopicSpec(results, PARTITIONS)])
    reader = ResultReader(kafka, results)
    config = WorkerConfig("synthetic", topic_prefix=prefix, concurrency=2)
    runtime = kafka_runtime(kafka, SyntheticPipeline(latency_ms=10), config)
    runtime.start()
    try:
        yield runtime, reader
    finally:
        runtime.stop()
        runtime.join(30)
        reader.close()
