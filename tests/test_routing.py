"""Routing on a real broker (issue 28, item 1): two pipelines on one prefix, one worker group
each (the synthetic pipeline under two names). Each group receives only its own pipeline's
tasks, every stream of both advances, a result for a stream of one pipeline sent as the other's
is rejected, and a pipeline that no worker or CLI has announced gets its topic from the
coordinator, on a broker that does not create topics on first use (streams.dev.broker sets
`auto.create.topics.enable=false`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from streams.kafka.admin import partition_counts
from streams.kafka.lag import consumer_lag
from streams.kafka.settings import KafkaSettings
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Feed, Tail

pytestmark = pytest.mark.broker
# The Faust engine's variants of these run in `make test-long` (tests/conftest.py).
LONG_ON_FAUST = ("test_two_pipelines_on_one_prefix_each_get_only_their_own_tasks",)
WINDOW = 1_000
STREAMS = {"a1": "alpha", "a2": "alpha", "b1": "beta", "b2": "beta"}


class RoutedWorker:
    """`python -m streams.worker --pipeline synthetic --route ROUTE`, in its own process."""

    def __init__(self, kafka: KafkaSettings, prefix: str, route: str, log: Path) -> None:
        cmd = [sys.executable, "-m", "streams.worker", "--pipeline", "synthetic", "--route",
               route, "--prefix", prefix, "--concurrency", "2", "--grace-s", "1"]  # fmt: skip
        env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)  # fmt: skip

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _broker_setting(kafka: KafkaSettings, name: str) -> str:
    admin = AdminClient(kafka.librdkafka())
    broker = min(admin.list_topics(timeout=10).brokers)
    resource = ConfigResource(ResourceType.BROKER, str(broker))
    entries = admin.describe_configs([resource], request_timeout=10)[resource].result(10)
    return str(entries[name].value)


def _wait_for_topic(kafka: KafkaSettings, topic: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while topic not in partition_counts(kafka, [topic]):
        assert time.monotonic() < deadline, f"{topic} was not made within {timeout_s} s"
        time.sleep(0.2)


@pytest.mark.parametrize("engine", ["confluent", "faust"])
def test_two_pipelines_on_one_prefix_each_get_only_their_own_tasks(
    kafka: KafkaSettings, unique: str, tmp_path: Path, engine: str
) -> None:
    assert _broker_setting(kafka, "auto.create.topics.enable") == "false"
    prefix = f"route-{unique}"
    coordinator = CoordinatorProcess(
        kafka, prefix, tmp_path / "data", tmp_path / "coord.log", engine=engine
    )
    coordinator.start().wait_ready()
    workers = [RoutedWorker(kafka, prefix, r, tmp_path / f"{r}.log") for r in ("alpha", "beta")]
    topics = ["tasks", "tasks.alpha", "tasks.beta", "results", "commits", "rejected"]
    tail: Tail | None = None
    gamma: Tail | None = None
    try:
        for route in ("alpha", "beta"):  # each worker makes its own topic at start
            _wait_for_topic(kafka, f"{prefix}.tasks.{route}")
        tail = Tail(kafka, prefix, topics, f"t-{uuid.uuid4()}")
        feed = Feed(kafka, prefix)
        start_ms = (time.time_ns() // 1_000_000 - 30_000) // WINDOW * WINDOW
        for stream, pipeline in STREAMS.items():
            feed.upsert(stream, start_ms, window_ms=WINDOW, step_ms=WINDOW, max_in_flight=4,
                        task_timeout_ms=10_000, pipeline=pipeline)  # fmt: skip

        def advanced(stream: str) -> bool:
            commits = tail.values("commits", stream)
            return any(c["downstream_ms"] >= start_ms + 10 * WINDOW for c in commits)

        tail.wait_for("every stream of both pipelines advancing",
                      lambda: all(advanced(s) for s in STREAMS), 90)  # fmt: skip

        # What each group consumed: the tasks on its topic, and the results it answered them
        # with (a worker says its pipeline in every result).
        for pipeline in ("alpha", "beta"):
            on_topic = {t["stream_id"] for t in tail.values(f"tasks.{pipeline}")}
            assert on_topic == {s for s, p in STREAMS.items() if p == pipeline}
            assert {t["pipeline"] for t in tail.values(f"tasks.{pipeline}")} == {pipeline}
            answered = {
                r["stream_id"] for r in tail.values("results") if r.get("pipeline") == pipeline
            }
            assert answered == on_topic, pipeline
        # And where each group committed: only on its own pipeline's topic.
        groups = f"{prefix}-workers-"
        expected = {(groups + r, f"{prefix}.tasks.{r}") for r in ("alpha", "beta")}
        deadline = time.monotonic() + 30
        while {(row.group, row.topic) for row in consumer_lag(kafka, groups)} != expected:
            assert time.monotonic() < deadline, consumer_lag(kafka, groups)
            time.sleep(0.5)
        assert tail.values("tasks") == []  # no stream of the default pipeline, no task there
        assert all("pipeline" in r for r in tail.values("results"))
        assert tail.values("rejected") == []

        # A result for a stream of alpha, sent as beta's worker would: rejected, naming both.
        task = tail.values("tasks.alpha", "a1")[-1]
        feed.result(task, "ack", ack_ms=task["end_ms"], pipeline="beta")
        (rejected,) = tail.wait_for("the wrong pipeline's result rejected",
                                    lambda: tail.values("rejected"), 30)  # fmt: skip
        assert rejected["source_topic"] == f"{prefix}.results"
        assert "'beta'" in rejected["reason"] and "'alpha'" in rejected["reason"]

        # A pipeline no worker and no CLI has announced: the coordinator makes its topic before
        # its first task (a transaction producing to a missing topic would abort again and
        # again), and the other pipelines go on meanwhile.
        feed.upsert("g1", start_ms, window_ms=WINDOW, step_ms=WINDOW, pipeline="gamma")
        _wait_for_topic(kafka, f"{prefix}.tasks.gamma")
        gamma = Tail(kafka, prefix, ["tasks.gamma"], f"g-{uuid.uuid4()}")
        first = gamma.wait_for("gamma's first task", lambda: gamma.values("tasks.gamma"), 30)
        assert {(t["stream_id"], t["pipeline"]) for t in first} == {("g1", "gamma")}
        mark = max(c["downstream_ms"] for c in tail.values("commits", "b1"))
        tail.wait_for("beta still advancing",
                      lambda: any(c["downstream_ms"] > mark for c in tail.values("commits", "b1")),
                      30)  # fmt: skip
        assert coordinator.exited() is None
    finally:
        for worker in workers:
            worker.stop()
        for reader in (tail, gamma):
            if reader is not None:
                reader.close()
        coordinator.stop()
