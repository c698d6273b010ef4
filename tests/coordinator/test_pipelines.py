"""Routing in the coordinator (issue 28, item 1): a stream's tasks go to its pipeline's topic, a
result from a worker of another pipeline is rejected, and no task goes to a topic that the
engine has not made sure exists (streams.coordinator.pipelines)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from streams.coordinator import pipelines as pipelines_module
from streams.coordinator.pipelines import TasksTopicGuard, tasks_topic_ensurer
from streams.coordinator.processor import partition_of
from streams.coordinator.settings import CoordinatorSettings
from streams.coordinator.telemetry.metrics import MAX_PIPELINE_LABELS, CoordinatorMetrics
from streams.errors import BrokerUnavailable
from streams.kafka.txn_errors import TransactionAborted
from streams.topics import Topics

from .fake_clients import FakeBroker
from .fakes import T0, Driver, RecordingEmitter, ack, at, nack
from .test_eos_renewal import PARTITIONS, Running, _engine

BOTH_ENGINES = pytest.mark.parametrize("transactional", [False, True], ids=["faust", "eos"])


def _started(d: Driver, stream_id: str, now_ms: int, **config: object) -> None:
    d.upsert(stream_id, now_ms, **config)
    d.assign(stream_id)
    d.tick(now_ms)


@BOTH_ENGINES
def test_each_streams_tasks_go_to_its_pipelines_topic(transactional: bool) -> None:
    d = Driver(transactional=transactional)
    _started(d, "logs-1", at(10, 0, 30), pipeline="logs")
    _started(d, "plain-1", at(10, 0, 30))
    d.tick(at(10, 1))
    sent = {(s.topic, s.json()["stream_id"], s.json().get("pipeline")) for s in d.emitter.work}
    assert sent == {
        ("tidemark.tasks.logs", "logs-1", "logs"),
        ("tidemark.tasks", "plain-1", None),  # the default pipeline's task keeps its bytes
    }


@BOTH_ENGINES
def test_a_result_from_a_worker_of_another_pipeline_is_rejected_naming_both(
    transactional: bool,
) -> None:
    d = Driver(transactional=transactional)
    _started(d, "logs-1", at(10, 0, 30), pipeline="logs")
    d.tick(at(10, 1))
    (task,) = d.emitter.values("tidemark.tasks.logs")
    before = d.store.snapshot()
    d.emitter.clear()
    d.result(ack(task, pipeline="metrics"), at(10, 1, 1))
    d.result(ack(task), at(10, 1, 2))  # a worker older than pipelines: the default one's
    reasons = [r["reason"] for r in d.rejected()]
    assert len(reasons) == 2 and d.processor.stats["rejected"] == 2
    assert "'metrics'" in reasons[0] and "'logs'" in reasons[0]
    assert "'default'" in reasons[1] and "'logs'" in reasons[1]
    assert d.commits() == [] and d.store.snapshot() == before
    d.result(ack(task, pipeline="logs"), at(10, 1, 3))
    assert [c["downstream_ms"] for c in d.commits()] == [at(10, 1)]


@BOTH_ENGINES
def test_a_replay_goes_to_the_pipelines_topic(transactional: bool) -> None:
    d = Driver(transactional=transactional)
    _started(d, "logs-1", at(10, 0, 30), pipeline="logs", max_attempts=1)
    d.tick(at(10, 1))
    (task,) = d.emitter.values("tidemark.tasks.logs")
    d.result(nack(task, pipeline="logs"), at(10, 1, 1))
    assert len(d.bypassed()) == 1
    d.emitter.clear()
    d.control({"type": "replay", "stream_id": "logs-1", "from_ms": T0, "to_ms": at(10, 1)},
              at(10, 2))  # fmt: skip
    d.tick(at(10, 2))
    replays = [s for s in d.emitter.work if s.json().get("replay")]
    assert [(s.topic, s.json()["pipeline"]) for s in replays] == [("tidemark.tasks.logs", "logs")]


def test_the_guard_makes_a_pipelines_topic_exist_once_before_its_first_task() -> None:
    emitter = RecordingEmitter()
    made: list[str] = []

    def ensure(pipeline: str) -> bool:
        assert emitter.on(f"tm.tasks.{pipeline}") == []  # before anything is produced to it
        made.append(pipeline)
        return True

    guard = TasksTopicGuard(Topics("tm"), emitter, ensure)
    guard.send("tm.tasks.logs", b"s", b"1")
    guard.send("tm.tasks.logs", b"s", b"2")
    guard.send("tm.tasks", b"s", b"3")  # the default one is made with every other topic
    guard.send("tm.commits", b"s", b"4")
    guard.send("tm.tasks.metrics", b"s", b"5")
    assert made == ["logs", "metrics"]
    assert [s.topic for s in emitter.sent] == [
        "tm.tasks.logs", "tm.tasks.logs", "tm.tasks", "tm.commits", "tm.tasks.metrics",
    ]  # fmt: skip


def test_the_guard_sends_nothing_when_ensure_raises_and_asks_again() -> None:
    """The confluent engine's ensure raises TransactionAborted: the event is handled again."""
    emitter = RecordingEmitter()
    calls: list[str] = []

    def ensure(pipeline: str) -> bool:
        calls.append(pipeline)
        if len(calls) == 1:
            raise TransactionAborted("could not make tm.tasks.logs")
        return True

    guard = TasksTopicGuard(Topics("tm"), emitter, ensure)
    with pytest.raises(TransactionAborted):
        guard.send("tm.tasks.logs", b"s", b"1")
    assert emitter.sent == []
    guard.send("tm.tasks.logs", b"s", b"1")
    guard.send("tm.tasks.logs", b"s", b"2")
    assert calls == ["logs", "logs"] and len(emitter.sent) == 2


def test_the_guard_sends_when_ensure_could_not_tell_and_asks_again() -> None:
    """The Faust engine's ensure returns False: the task goes out, the next one asks again."""
    emitter = RecordingEmitter()
    answers = [False, True]
    guard = TasksTopicGuard(Topics("tm"), emitter, lambda pipeline: answers.pop(0))
    for value in (b"1", b"2", b"3"):
        guard.send("tm.tasks.logs", b"s", value)
    assert answers == [] and len(emitter.sent) == 3


def test_the_engines_ensure_a_pipelines_topic_as_the_coordinator_made_its_own() -> None:
    settings = CoordinatorSettings(partitions=3, replication=2, min_insync_replicas=1)
    calls: list[tuple[object, ...]] = []
    failing = [True]

    def make(*args: object) -> bool:
        calls.append(args)
        if failing[0]:
            raise BrokerUnavailable("no controller")
        return True

    eos, faust = (tasks_topic_ensurer(settings, aborts, make) for aborts in (True, False))
    with pytest.raises(TransactionAborted, match=r"tidemark\.tasks\.logs"):
        eos("logs")
    assert faust("logs") is False  # said in a warning; the task goes out anyway
    failing[0] = False
    assert eos("logs") is True and faust("logs") is True
    assert calls == 4 * [(settings.kafka, settings.topics, "logs", 3, 2, 1)]


def _sample(d: Driver, name: str, **labels: str) -> float:
    return d.processor.metrics.registry.get_sample_value(name, labels) or 0.0


def test_dispatches_and_results_are_counted_by_pipeline() -> None:
    d = Driver()
    _started(d, "logs-1", at(10, 0, 30), pipeline="logs")
    _started(d, "plain-1", at(10, 0, 30))
    d.tick(at(10, 1))
    (task,) = d.emitter.values("tidemark.tasks.logs")
    d.result(ack(task, pipeline="logs"), at(10, 1, 1))
    d.result(ack(task, pipeline="metrics"), at(10, 1, 2))  # rejected, but counted as decoded
    d.result(ack(task), at(10, 1, 3))
    dispatched = "tidemark_pipeline_tasks_dispatched_total"
    assert _sample(d, dispatched, pipeline="logs") == 1
    assert _sample(d, dispatched, pipeline="default") == 1
    results = "tidemark_pipeline_results_total"
    for pipeline in ("logs", "metrics", "default"):
        assert _sample(d, results, pipeline=pipeline, outcome="ack") == 1
    assert _sample(d, "tidemark_tasks_dispatched_total") == 2  # the totals stay as they were


def test_the_pipeline_label_is_bounded() -> None:
    metrics = CoordinatorMetrics()
    for n in range(MAX_PIPELINE_LABELS + 5):
        metrics.result("ack", f"p{n}")
    get = metrics.registry.get_sample_value
    assert get("tidemark_pipeline_results_total", {"pipeline": "other", "outcome": "ack"}) == 5
    assert get("tidemark_pipeline_results_total", {"pipeline": "p0", "outcome": "ack"}) == 1


def test_the_confluent_engine_aborts_and_handles_the_upsert_again_until_the_topic_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Producing to a topic that does not exist would abort every transaction; a topic that
    cannot be made yet aborts one, and the upsert is handled again (not lost)."""
    broker = FakeBroker(PARTITIONS)
    made: list[tuple[str, int]] = []  # (pipeline, tasks produced to its topic by then)

    def make(settings: object, topics: Topics, pipeline: str, *rest: object) -> bool:
        made.append((pipeline, broker.count(topics.tasks_for(pipeline))))
        if len(made) == 1:
            raise BrokerUnavailable("Timed out waiting for controller")
        return True

    monkeypatch.setattr(pipelines_module, "ensure_tasks_topic", make)
    engine = _engine(tmp_path, broker, monkeypatch, "routed")
    start = time.time_ns() // 1_000_000 - 5_000
    value = {"type": "upsert", "stream_id": "s1", "start_ms": start - start % 1000,
             "window_ms": 1000, "step_ms": 1000, "pipeline": "logs"}  # fmt: skip
    key = b"s1"
    broker.append(engine.topics.control, partition_of(key, PARTITIONS), key,
                  json.dumps(value).encode())  # fmt: skip
    logs = engine.topics.tasks_for("logs")
    with Running(engine) as running:
        running.wait_for("the stream's tasks on its pipeline's topic", lambda: broker.count(logs))
    assert made == [("logs", 0), ("logs", 0)]  # made before its first task, asked again once
    assert broker.made[0].calls.count("abort") == 1, broker.made[0].calls  # one transaction
    assert broker.count(engine.topics.tasks) == 0
    assert {t["pipeline"] for t in broker.records(logs)} == {"logs"}
