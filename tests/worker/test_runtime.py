"""The worker runtime against the real broker: results, commits, skips, heartbeats, shutdown.

The tests of a gated handler run twice (the ``gated`` fixture): with a sync handler on threads
and with an ``async`` one on the event loop.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from streams.dev.broker import free_port
from streams.handler import AnyHandler
from streams.kafka.admin import create_topics
from streams.kafka.settings import KafkaSettings
from streams.pipelines.synthetic import SyntheticPipeline
from streams.topics import TopicSpec
from streams.worker.api import HANDLER_ERROR, SHUTDOWN, Task
from streams.worker.config import WorkerConfig
from streams.worker.runner import kafka_runtime
from streams.worker.runtime import WorkerRuntime
from tests.worker.kafka_helpers import (
    PARTITIONS,
    AsyncGatedHandler,
    GatedHandler,
    ResultReader,
    committed,
    for_task,
    make_task,
    running,
    send,
    wait_until,
)

pytestmark = pytest.mark.broker


class World:
    """One test's topics, group, metrics registry and result reader."""

    def __init__(self, kafka: KafkaSettings, unique: str) -> None:
        self.kafka = kafka
        self.prefix = f"w-{unique}"
        self.tasks = f"{self.prefix}.tasks"
        self.results_topic = f"{self.prefix}.results"
        create_topics(
            kafka,
            [TopicSpec(self.tasks, PARTITIONS), TopicSpec(self.results_topic, PARTITIONS)],
        )
        self.registry = CollectorRegistry()
        self.results = ResultReader(kafka, self.results_topic)
        self.group = f"{self.prefix}-workers-test"

    def runtime(
        self, handler: AnyHandler, registry: CollectorRegistry | None = None, **config: Any
    ) -> WorkerRuntime:
        """A worker of the test group; metrics in ``registry``, else in ``self.registry``."""
        cfg = WorkerConfig("test", topic_prefix=self.prefix, **config)
        assert cfg.group == self.group
        return kafka_runtime(self.kafka, handler, cfg, registry=registry or self.registry)

    def send(self, *values: Task | bytes) -> list[tuple[int, int]]:
        return send(self.kafka, self.tasks, *values)

    def join_group(self, handler: GatedHandler | None = None) -> None:
        """Wait until a started worker has answered a warm-up task: it is in the group and
        fetching, so that a task sent from now on starts at once."""
        warm_up = make_task("warm-up")
        if handler is not None:
            handler.open(warm_up)
        self.send(warm_up)
        self.results.wait_for("the warm-up ack", for_task(warm_up, "ack"))

    def committed(self) -> dict[int, int]:
        return committed(self.kafka, self.group, self.tasks)

    def count(self, outcome: str) -> float:
        labels = {"pipeline": "test", "outcome": outcome}
        return self.registry.get_sample_value("tidemark_worker_tasks_total", labels) or 0.0

    def in_flight(self) -> float:
        value = self.registry.get_sample_value("tidemark_worker_in_flight", {"pipeline": "test"})
        return value or 0.0


@pytest.fixture(params=[GatedHandler, AsyncGatedHandler], ids=["thread", "coroutine"])
def gated(request: pytest.FixtureRequest) -> type[GatedHandler]:
    """The kind of gated handler: a sync one, or the same declared ``async``."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def world(kafka: KafkaSettings, unique: str) -> Iterator[World]:
    w = World(kafka, unique)
    try:
        yield w
    finally:
        w.results.close()


def test_a_task_is_acked_keyed_by_its_stream_and_its_offset_committed(world: World) -> None:
    task = make_task("stream-a", params={"latency_ms": 10})
    ((partition, offset),) = world.send(task)

    with running(world.runtime(SyntheticPipeline())):
        (ack,) = world.results.wait_for("the ack", for_task(task, "ack"))
        wait_until(lambda: world.committed().get(partition) == offset + 1, 15, "the commit")

    assert ack == {
        "stream_id": "stream-a",
        "start_ms": task.start_ms,
        "end_ms": task.end_ms,
        "attempt": 1,
        "outcome": "ack",
        "ack_ms": task.end_ms,
    }
    assert [key for key, _ in world.results.read()] == [b"stream-a"]
    assert world.count("ack") == 1


def test_a_handler_exception_becomes_a_handler_error_nack_and_work_goes_on(
    world: World,
) -> None:
    def handler(task: Task) -> Any:
        if task.params.get("explode"):
            raise RuntimeError("boom at the source")
        return SyntheticPipeline()(task)

    bad = make_task("stream-b", 1, params={"explode": True})
    good = make_task("stream-b", 2)
    [_, (partition, offset)] = world.send(bad, good)

    with running(world.runtime(handler)):
        (nack,) = world.results.wait_for("the nack", for_task(bad, "nack"))
        world.results.wait_for("the next task's ack", for_task(good, "ack"))
        wait_until(lambda: world.committed().get(partition) == offset + 1, 15, "the commit")

    assert nack["error"] == {"kind": HANDLER_ERROR, "message": "RuntimeError: boom at the source"}
    assert world.count("nack") == 1


def test_expired_and_undecodable_tasks_are_skipped_counted_and_committed(world: World) -> None:
    expired = make_task("stream-c", 1, timeout_ms=-1)  # its deadline passed before it was sent
    valid = make_task("stream-c", 2)
    placed = world.send(expired, b"{not json", b'{"task_id": "x"}', valid)

    with running(world.runtime(SyntheticPipeline())):
        world.results.wait_for("the valid task's ack", for_task(valid, "ack"))
        positions = {p: o + 1 for p, o in placed}  # every partition past its last message
        wait_until(lambda: world.committed() == positions, 15, f"commits at {positions}")

    assert world.count("expired") == 1
    assert world.count("invalid") == 2
    assert [v["end_ms"] for v in world.results.values()] == [valid.end_ms]


def test_an_early_task_waits_for_its_end_ms_without_holding_up_others(
    world: World, gated: type[GatedHandler]
) -> None:
    handler = gated()
    handler.open_all()

    with running(world.runtime(handler, concurrency=1), handler):
        world.join_group()
        early = make_task("stream-d", 1, end_in_ms=1_500)
        on_time = make_task("stream-d", 2)
        world.send(early, on_time)
        world.results.wait_for("the early task's ack", for_task(early, "ack"))

    assert handler.started[early.task_id] >= early.end_ms
    assert handler.started[on_time.task_id] < early.end_ms
    assert handler.returned[-2:] == [on_time.task_id, early.task_id]


def test_a_running_handler_sends_heartbeats_every_third_of_the_timeout(
    world: World, gated: type[GatedHandler]
) -> None:
    handler = gated()

    with running(world.runtime(handler), handler):
        world.join_group(handler)
        task = make_task("stream-e", 2, timeout_ms=900)  # a heartbeat every 300 ms
        world.send(task)
        beats = world.results.wait_for("heartbeats", for_task(task, "heartbeat"), count=3)
        handler.open(task)
        world.results.wait_for("the ack", for_task(task, "ack"))

    assert beats[0] == {
        "stream_id": "stream-e",
        "start_ms": task.start_ms,
        "end_ms": task.end_ms,
        "attempt": 1,
        "outcome": "heartbeat",
    }
    outcomes = [v["outcome"] for v in world.results.values() if v["stream_id"] == "stream-e"]
    assert outcomes[-1] == "ack" and set(outcomes[:-1]) == {"heartbeat"}


def test_shutdown_nacks_unfinished_work_and_commits_past_it(
    world: World, gated: type[GatedHandler]
) -> None:
    handler = gated()
    stuck = make_task("stream-f", 1)
    quick = make_task("stream-f", 2)
    queued = make_task("stream-f", 3)
    placed = world.send(stuck, quick, queued)
    runtime = world.runtime(handler, concurrency=2, grace_s=1.0)

    runtime.start()
    try:
        wait_until(lambda: len(handler.started) == 2 and world.in_flight() == 3, 15, "work")
        runtime.stop()
        handler.open(quick)  # finishes within the grace period: acked
        assert runtime.join(15)
    finally:
        runtime.stop()
        handler.open_all()
        runtime.join(15)

    results = {v["end_ms"]: v for v in world.results.values()}
    assert results[quick.end_ms]["outcome"] == "ack"
    for task in (stuck, queued):
        assert results[task.end_ms]["outcome"] == "nack"
        assert results[task.end_ms]["error"]["kind"] == SHUTDOWN
    (partition, last), *_ = placed[::-1]
    assert world.committed() == {partition: last + 1}
    assert world.count("shutdown") == 2
    assert world.count("ack") == 1


def test_commits_never_pass_a_running_task(world: World, gated: type[GatedHandler]) -> None:
    """Four tasks on one partition, finished out of order: the commit waits for the first."""
    handler = gated()
    tasks = [make_task("stream-g", i) for i in range(4)]
    placed = world.send(*tasks)
    partition = placed[0][0]
    offsets = [o for _, o in placed]

    with running(world.runtime(handler, concurrency=4), handler):
        wait_until(lambda: len(handler.started) == 4, 15, "four running tasks")

        handler.open(tasks[2], tasks[3])
        world.results.wait_for("the later acks", lambda v: v["outcome"] == "ack", count=2)
        assert world.committed().get(partition, offsets[0]) <= offsets[0]

        handler.open(tasks[0])
        wait_until(lambda: world.committed().get(partition) == offsets[1], 15, "commit to 1")

        handler.open(tasks[1])
        wait_until(lambda: world.committed().get(partition) == offsets[3] + 1, 15, "all")

    assert world.committed() == {partition: offsets[3] + 1}


def test_backpressure_bounds_the_tasks_taken(world: World, gated: type[GatedHandler]) -> None:
    handler = gated()
    tasks = [make_task("stream-h", i) for i in range(8)]
    world.send(*tasks)

    with running(world.runtime(handler, concurrency=2, buffer=1), handler):
        wait_until(lambda: world.in_flight() == 3, 15, "three tasks taken")
        peak = 0.0
        deadline = time.monotonic() + 1.0  # watch long enough for unbounded fetching to show
        while time.monotonic() < deadline:
            peak = max(peak, world.in_flight())
            time.sleep(0.01)
        assert peak == 3
        assert len(handler.started) == 2

        handler.open_all()
        world.results.wait_for("every ack", lambda v: v["outcome"] == "ack", count=8)

    assert world.count("ack") == 8


def test_a_rebalance_moves_running_work_without_losing_a_task(
    world: World, gated: type[GatedHandler]
) -> None:
    """A second worker joins while the first runs a task on every partition: the moved tasks
    run again on the newcomer, the first worker's late results are still produced, and in
    the end every partition is committed past its tasks."""
    first_handler, second_handler = gated(), gated()
    second_handler.open_all()
    tasks = [make_task(f"stream-r{i}") for i in range(9)]
    placed = world.send(*tasks)
    assert {p for p, _ in placed} == set(range(PARTITIONS))
    ends = {p: o + 1 for p, o in sorted(placed)}  # the last offset of each partition, + 1

    with running(world.runtime(first_handler, concurrency=9), first_handler):
        wait_until(lambda: len(first_handler.started) == 9, 15, "the first worker on all")
        second = world.runtime(second_handler, CollectorRegistry(), concurrency=9)
        with running(second, second_handler):
            wait_until(lambda: second_handler.returned, 20, "the second worker's first task")
            moved = {t.task_id for t in tasks} & set(second_handler.returned)
            first_handler.open_all()
            world.results.wait_for(
                "every ack", lambda v: v["outcome"] == "ack", count=9 + len(moved)
            )
            wait_until(lambda: world.committed() == ends, 15, f"commits at {ends}")

    acked = [(v["stream_id"], v["end_ms"]) for v in world.results.values("ack")]
    assert {(t.stream_id, t.end_ms) for t in tasks} == set(acked)
    assert len(acked) == 9 + len(moved)  # the moved ones twice: no late result was dropped


class WorkerProcess:
    """``python -m streams.worker`` as a child process, its log in a file."""

    def __init__(self, world: World, log: Path, *args: str) -> None:
        self.log = log
        env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": world.kafka.bootstrap_servers}
        command = [sys.executable, "-m", "streams.worker", "--pipeline", "synthetic"]
        command += ["--prefix", world.prefix, "--group", world.group, *args]
        with log.open("w") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)

    def logged(self, text: str) -> bool:
        return text in self.log.read_text()

    def end(self, sig: signal.Signals) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(30)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def test_a_worker_killed_mid_task_redoes_it_after_restart(world: World, tmp_path: Path) -> None:
    """SIGKILL while a task runs: nothing was committed past it, and a restart redoes it."""
    slow = make_task("stream-k", 1, timeout_ms=60_000)  # takes the worker's latency option
    quick = make_task("stream-k", 2, params={"latency_ms": 0})
    [(partition, slow_offset), (_, quick_offset)] = world.send(slow, quick)
    port = free_port()
    common = ("--instance-id", "worker-1", "--concurrency", "2")

    first = WorkerProcess(
        world,
        tmp_path / "first.log",
        *common,
        "--option",
        "latency_ms=60000",
        "--port",
        str(port),
    )
    try:
        wait_until(lambda: first.logged(f"started task {slow.task_id}"), 30, "the slow task")
        world.results.wait_for("the quick task's ack", for_task(quick, "ack"))
        metrics = scrape(port)
        assert 'tidemark_worker_in_flight{pipeline="synthetic"} 1.0' in metrics
        assert 'tidemark_worker_tasks_total{outcome="ack",pipeline="synthetic"} 1.0' in metrics
        assert world.committed().get(partition, slow_offset) == slow_offset
    finally:
        assert first.end(signal.SIGKILL) == -signal.SIGKILL

    assert world.committed().get(partition, slow_offset) == slow_offset
    assert not [v for v in world.results.values() if v["end_ms"] == slow.end_ms]

    second = WorkerProcess(world, tmp_path / "second.log", *common, "--option", "latency_ms=0")
    try:
        world.results.wait_for("the slow task's ack", for_task(slow, "ack"), timeout_s=30)
        wait_until(lambda: world.committed().get(partition) == quick_offset + 1, 15, "the commit")
    finally:
        assert second.end(signal.SIGTERM) == 0, second.log.read_text()
    assert second.logged("worker synthetic stopped")
