"""The worker's task source renews a stalled consumer (no broker: the client is a fake)."""

from __future__ import annotations

import json
import logging
from typing import Any, ClassVar

import pytest
from confluent_kafka import TopicPartition

from streams.kafka import worker_io
from streams.kafka.progress import ProgressWatch, Stall
from streams.kafka.settings import KafkaSettings
from streams.kafka.topic_io import TopicReader
from streams.worker.config import WorkerConfig


class FakeConsumer:
    made: ClassVar[list[FakeConsumer]] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.subscribed: list[str] = []
        self.closed = False
        FakeConsumer.made.append(self)

    def subscribe(self, topics: list[str], **_callbacks: Any) -> None:
        self.subscribed = topics

    def poll(self, _timeout_s: float) -> None:
        return None

    def close(self) -> None:
        self.closed = True

    def assignment(self) -> list[Any]:
        return []


class StallsOnce:
    """A KafkaProgress that finds one stall, then none; it records what it was told."""

    def __init__(self) -> None:
        self.stall: Stall | None = Stall(40_000, {("tasks", 0): (5, 9)})
        self.checks: list[dict[str, Any]] = []
        self.renewals = 0

    def check(self, _consumer: Any, **kwargs: Any) -> Stall | None:
        self.checks.append(kwargs)
        stall, self.stall = self.stall, None
        return stall

    def renewed(self) -> None:
        self.renewals += 1


def test_a_stalled_task_consumer_is_said_and_renewed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    FakeConsumer.made.clear()
    monkeypatch.setattr(worker_io, "Consumer", FakeConsumer)
    source = worker_io.KafkaTaskSource(KafkaSettings(), WorkerConfig(pipeline="synthetic"))
    progress = StallsOnce()
    source._progress = progress  # type: ignore[assignment]
    source.open(listener=object())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="streams.worker"):
        assert source.poll(0) is None
    first, second = FakeConsumer.made
    assert first.closed and not second.closed
    assert second.subscribed == first.subscribed
    assert (source.renewals, progress.renewals) == (1, 1)
    assert [r.message for r in caplog.records] == [
        "the task consumer stalled, renewing it: no progress for 40000 ms while records wait: "
        "tasks[0] at 5 of 9"
    ]
    source.pause()
    assert source.poll(0) is None and len(FakeConsumer.made) == 2
    assert progress.checks[-1] == {"all_paused": True, "group_state": None}
    # The member's group state comes from librdkafka's statistics, served by poll().
    assert second.config["statistics.interval.ms"] == worker_io.STATS_INTERVAL_MS
    second.config["stats_cb"]('{"cgrp": {"state": "up", "join_state": "wait-join"}}')
    source.resume()
    source.poll(0)
    assert progress.checks[-1] == {"all_paused": False, "group_state": ("up", "wait-join")}


def test_a_topic_reader_that_reads_nothing_while_the_ends_move_on_renews_its_consumer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The read model's reader (streams.kafka.topic_io), judged between two reads."""
    reader = TopicReader(KafkaSettings(), ["t"], "test")
    reader._watch = ProgressWatch(bound_ms=0)
    reader._positions[("t", 0)] = 3
    consumer = reader._clients.consumer()  # made lazily, no broker contacted
    reader._check_progress({("t", 0): (0, 10)})
    assert reader.renewals == 0
    reader._check_progress({("t", 0): (0, 12)})  # more arrived, and it read none of it
    assert reader.renewals == 1
    assert reader._clients.consumer() is not consumer
    assert "reading t stalled, renewing its consumer" in caplog.text
    reader.close()


def _stats(*states: str) -> str:
    brokers = {f"b{i}": {"state": s, "nodeid": i} for i, s in enumerate(states)}
    return json.dumps({"cgrp": {"state": "up", "join_state": "steady"}, "brokers": brokers})


def test_a_source_with_no_broker_up_waits_saying_so_once_a_minute_and_when_it_ends(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A broker outage is waited out, not failed: the source says it waits (a WARNING a minute,
    with how long and the last error), its health says so, and it says when it ends."""
    FakeConsumer.made.clear()
    monkeypatch.setattr(worker_io, "Consumer", FakeConsumer)
    now = [1_000_000]
    source = worker_io.KafkaTaskSource(
        KafkaSettings(), WorkerConfig(pipeline="synthetic"), now_ms=lambda: now[0]
    )
    source._progress = StallsOnce()  # type: ignore[assignment]
    source._progress.stall = None  # type: ignore[attr-defined]
    source.open(listener=object())  # type: ignore[arg-type]
    stats_cb = FakeConsumer.made[0].config["stats_cb"]
    stats_cb(_stats("UP"))
    assert source.brokers.health(now[0]) == {"kafka": "ok"}
    with caplog.at_level(logging.INFO, logger="streams.worker"):
        stats_cb(_stats("DOWN", "CONNECT"))
        warnings = []
        for step_s in range(0, 150, 5):  # polled every 5 s for 150 s, no broker up
            now[0] = 1_000_000 + step_s * 1000
            source.poll(0)
            stats_cb(_stats("TRY_CONNECT"))
        warnings = [r.message for r in caplog.records if r.levelno == logging.WARNING]
        health = source.brokers.health(now[0])
        now[0] += 5000
        stats_cb(_stats("DOWN", "UP"))
        source.poll(0)
    assert warnings == [
        "no Kafka broker connection is up; the worker waits for one",
        "waiting for the Kafka brokers for 60 s (13 failed attempts); last error: no broker "
        "connection up (states: TRY_CONNECT); the worker goes on retrying",
        "waiting for the Kafka brokers for 120 s (25 failed attempts); last error: no broker "
        "connection up (states: TRY_CONNECT); the worker goes on retrying",
    ]
    assert health == {
        "kafka": "waiting_for_brokers",
        "kafka_waiting_since_ms": 1_000_000,
        "kafka_waited_s": 145.0,
        "kafka_last_error": "no broker connection up (states: TRY_CONNECT)",
    }
    assert caplog.records[-1].message == "Kafka brokers answer again after 150 s"
    assert source.brokers.health(now[0]) == {"kafka": "ok"}
    assert len(FakeConsumer.made) == 1  # waited, not renewed


class StickyPauseConsumer(FakeConsumer):
    """Keeps librdkafka's pause rule: a partition paused by the application stays paused
    after it is lost and assigned again, until resumed (confluentinc/librdkafka#1849)."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self.assigned: set[tuple[str, int]] = set()
        self.paused: set[tuple[str, int]] = set()
        self.callbacks: dict[str, Any] = {}

    def subscribe(self, topics: list[str], **callbacks: Any) -> None:
        super().subscribe(topics)
        self.callbacks = callbacks

    def assignment(self) -> list[Any]:
        return [TopicPartition(t, p) for t, p in sorted(self.assigned)]

    def incremental_assign(self, tps: list[Any]) -> None:
        self.assigned |= {(tp.topic, tp.partition) for tp in tps}

    def pause(self, tps: list[Any]) -> None:
        self.paused |= {(tp.topic, tp.partition) for tp in tps}

    def resume(self, tps: list[Any]) -> None:
        self.paused -= {(tp.topic, tp.partition) for tp in tps}

    def lose_all(self) -> None:
        lost = self.assignment()
        self.callbacks["on_lost"](self, lost)
        self.assigned.clear()  # what confluent-kafka does after the callback; pauses stay

    def fetching(self) -> set[tuple[str, int]]:
        return self.assigned - self.paused


class _Listener:
    def assigned(self, _partitions: Any) -> None:
        pass

    def lost(self, _partitions: Any) -> None:
        pass

    def fatal(self, _reason: str) -> None:
        pass


def test_partitions_paused_before_an_outage_fetch_again_when_assigned_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full buffer paused the assignment as the broker went away (results could not be
    delivered); the partitions were lost at the session timeout; the results went out once the
    broker was back and the worker resumed, with nothing assigned; then the group gave the
    partitions back. librdkafka kept them paused: the worker fetched nothing more (a scratch
    run after a 5 min outage: 80 s without a task while the coordinator dispatched 90)."""
    StickyPauseConsumer.made.clear()
    monkeypatch.setattr(worker_io, "Consumer", StickyPauseConsumer)
    source = worker_io.KafkaTaskSource(KafkaSettings(), WorkerConfig(pipeline="synthetic"))
    source.open(_Listener())  # type: ignore[arg-type]
    consumer = StickyPauseConsumer.made[0]
    assert isinstance(consumer, StickyPauseConsumer)
    tasks = [TopicPartition("tidemark.tasks", p) for p in range(3)]
    consumer.callbacks["on_assign"](consumer, tasks)
    assert len(consumer.fetching()) == 3
    source.pause()  # the buffer is full: results wait for the broker
    consumer.lose_all()  # the session timed out
    source.resume()  # the results went out; nothing is assigned yet
    consumer.callbacks["on_assign"](consumer, tasks)  # the group is back
    assert consumer.fetching() == {("tidemark.tasks", p) for p in range(3)}
    source.pause()  # and a pause still holds across a new assignment
    consumer.lose_all()
    consumer.callbacks["on_assign"](consumer, tasks)
    assert consumer.fetching() == set()
