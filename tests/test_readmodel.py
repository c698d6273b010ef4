"""The read model: pure `apply` over the public topics' values, and one `refresh` on the broker."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from streams.coordinator.topics import Topics
from streams.core import task_id
from streams.errors import BrokerUnavailable
from streams.kafka.admin import create_topics
from streams.kafka.settings import KafkaSettings
from streams.readmodel import BypassView, ReadModel, StreamView

T0 = 1_795_946_400_000  # 2026-11-29T10:00:00Z
MIN = 60_000


@pytest.fixture
def model() -> Iterator[ReadModel]:
    rm = ReadModel(KafkaSettings("127.0.0.1:1"), "tm")
    yield rm
    rm.close()


def put(rm: ReadModel, topic: str, value: Any, key: str | None = None) -> None:
    if key is None and isinstance(value, dict):
        key = value.get("stream_id")
    raw = value if value is None or isinstance(value, bytes) else json.dumps(value).encode()
    rm.apply(topic, None if key is None else key.encode(), raw)


def upsert(stream_id: str = "s", **config: Any) -> dict[str, Any]:
    return {"type": "upsert", "stream_id": stream_id, "start_ms": T0, **config}


def task(start: int, attempt: int = 1, stream_id: str = "s", **extra: Any) -> dict[str, Any]:
    return {
        "task_id": task_id(stream_id, start, attempt),
        "stream_id": stream_id,
        "start_ms": start,
        "end_ms": start + MIN,
        "step_ms": 15_000,
        "attempt": attempt,
        "dispatched_ms": start + MIN,
        "deadline_ms": start + 2 * MIN,
        "params": {},
        **extra,
    }


def nack(start: int, kind: str = "no_data", attempt: int = 1) -> dict[str, Any]:
    return {
        "stream_id": "s",
        "start_ms": start,
        "end_ms": start + MIN,
        "attempt": attempt,
        "outcome": "nack",
        "error": {"kind": kind, "message": f"{kind} at {start}"},
    }


def commit(downstream: int, committed: int | None = None, reason: str = "ack") -> dict[str, Any]:
    return {
        "stream_id": "s",
        "downstream_ms": downstream,
        "previous_ms": downstream - MIN,
        "committed_ms": downstream + 100 if committed is None else committed,
        "windows": [
            {"start_ms": downstream - MIN, "end_ms": downstream, "reason": reason, "attempts": 1}
        ],
    }


def bypass(start: int, stream_id: str = "s", bypassed: int | None = None) -> dict[str, Any]:
    return {
        "stream_id": stream_id,
        "start_ms": start,
        "end_ms": start + MIN,
        "attempts": 3,
        "first_failed_ms": start + MIN,
        "bypassed_ms": start + 5 * MIN if bypassed is None else bypassed,
        "last_error": {"kind": "timeout", "message": "no result"},
    }


def the(rm: ReadModel, stream_id: str = "s") -> StreamView:
    view = rm.stream(stream_id)
    assert view is not None
    return view


def test_an_upsert_makes_a_stream_with_its_full_config(model: ReadModel) -> None:
    put(model, "control", upsert(window_ms=30_000, step_ms=15_000, params={"q": "up"}))

    view = the(model)
    assert view.config is not None
    assert (view.config["window_ms"], view.config["delay_ms"]) == (30_000, 0)
    assert view.config["retry"] == {"strategy": "fixed", "interval_ms": 60_000}
    assert view.config["params"] == {"q": "up"}
    assert (view.paused, view.downstream_ms, view.window, view.attempt) == (False, None, None, 0)
    assert view.lag_ms(T0 + MIN) == MIN  # before the first commit: behind start_ms
    assert [v.stream_id for v in model.streams()] == ["s"]


def test_invalid_controls_are_ignored_like_the_coordinator_rejects_them(model: ReadModel) -> None:
    put(model, "control", b"{not json")
    put(model, "control", [1, 2])
    put(model, "control", upsert(window_ms=20_000, step_ms=15_000))  # not a multiple
    put(model, "control", upsert(), key="other")  # key differs from stream_id
    put(model, "control", upsert(stream_id=""))
    put(model, "control", {"type": "pause", "stream_id": "ghost"})

    assert model.streams() == []


def test_pause_resume_and_delete(model: ReadModel) -> None:
    put(model, "control", upsert())
    put(model, "control", {"type": "pause", "stream_id": "s"})
    assert the(model).paused
    assert the(model).state(T0) == "paused"
    put(model, "control", {"type": "resume", "stream_id": "s"})
    assert not the(model).paused

    put(model, "commits", commit(T0 + MIN))
    put(model, "control", {"type": "delete", "stream_id": "s"})
    assert model.stream("s") is None and model.streams() == []

    put(model, "commits", commit(T0 + 2 * MIN))  # read late from another topic: still deleted
    put(model, "tasks", task(T0 + 2 * MIN))
    assert model.streams() == []

    put(model, "control", upsert())  # re-created
    assert the(model).config is not None


def test_commits_move_progress_forward_only(model: ReadModel) -> None:
    put(model, "control", upsert())
    put(model, "commits", commit(T0 + 2 * MIN))
    put(model, "commits", commit(T0 + MIN))  # a repeated, older commit (after a crash)

    view = the(model)
    assert view.downstream_ms == T0 + 2 * MIN
    assert view.last_commit_ms == T0 + 2 * MIN + 100
    assert view.lag_ms(T0 + 3 * MIN) == MIN


def test_tasks_set_the_current_window_and_attempt_but_replays_do_not(model: ReadModel) -> None:
    put(model, "control", upsert())
    put(model, "tasks", task(T0))
    put(model, "tasks", task(T0, attempt=2))
    put(model, "tasks", task(T0 - 10 * MIN, attempt=4, replay=True))

    view = the(model)
    assert (view.window, view.attempt) == ((T0, T0 + MIN), 2)
    assert view.state(T0 + MIN) == "retrying"


def test_a_nack_is_the_last_error_until_a_commit_passes_its_window(model: ReadModel) -> None:
    put(model, "control", upsert())
    put(model, "tasks", task(T0))
    put(model, "results", nack(T0, "no_data"))
    put(model, "results", nack(T0, "outage"))
    assert the(model).last_error == {"kind": "outage", "message": f"outage at {T0}"}
    assert the(model).state(T0 + MIN) == "retrying"

    put(model, "commits", commit(T0 + MIN))

    assert the(model).last_error is None
    assert the(model).state(T0 + MIN) == "live"


def test_a_nack_read_after_the_commit_that_passed_it_is_not_an_error(model: ReadModel) -> None:
    put(model, "control", upsert())
    put(model, "commits", commit(T0 + MIN))
    put(model, "results", nack(T0))  # topics are read side by side: this came first
    put(model, "results", {**nack(T0 + MIN), "error": {"message": "no kind"}})  # invalid
    put(model, "results", {**nack(T0 + MIN), "outcome": "ack", "ack_ms": T0 + 2 * MIN})

    assert the(model).last_error is None


def test_a_retry_of_a_committed_window_is_not_retrying(model: ReadModel) -> None:
    put(model, "control", upsert())
    put(model, "tasks", task(T0, attempt=3))
    put(model, "commits", commit(T0 + MIN, reason="bypass"))

    assert the(model).state(T0 + MIN) == "live"


def test_states_by_precedence(model: ReadModel) -> None:
    put(model, "control", upsert(window_ms=MIN, delay_ms=30_000))
    put(model, "commits", commit(T0 + MIN))
    behind = 2 * MIN + 30_000  # past this much lag a stream is catching up

    assert the(model).state(T0 + MIN + behind) == "live"
    assert the(model).state(T0 + MIN + behind + 1) == "catching up"
    put(model, "results", nack(T0 + MIN))
    assert the(model).state(T0 + MIN + behind + 1) == "retrying"
    put(model, "control", {"type": "pause", "stream_id": "s"})
    assert the(model).state(T0 + MIN + behind + 1) == "paused"


def test_a_stream_known_only_from_its_outputs_has_no_config(model: ReadModel) -> None:
    put(model, "commits", commit(T0 + MIN))  # its upsert is gone from control (retention)

    view = the(model)
    assert view.config is None
    assert view.state(T0 + 100 * MIN) == "live"  # no config: no window to measure by
    assert view.lag_ms(T0 + 2 * MIN) == MIN
    assert StreamView("x").lag_ms(T0) is None


def test_bypassed_windows_are_listed_until_a_tombstone(model: ReadModel) -> None:
    put(model, "control", upsert())
    for i in range(3):
        put(model, "bypassed", bypass(T0 + i * MIN), key=f"s/{T0 + i * MIN}")
    put(model, "bypassed", bypass(T0, stream_id="t", bypassed=T0), key=f"t/{T0}")
    put(model, "bypassed", bypass(T0 + MIN), key=f"s/{T0 + MIN}")  # relisted: no double count
    put(model, "bypassed", b"garbage", key=f"s/{T0 + 9 * MIN}")

    assert the(model).bypasses == 3
    assert [(b.stream_id, b.start_ms) for b in model.bypasses()] == [
        ("s", T0 + 2 * MIN),
        ("s", T0 + MIN),
        ("s", T0),
        ("t", T0),
    ]
    assert len(model.bypasses(limit=2)) == 2

    put(model, "bypassed", None, key=f"s/{T0 + MIN}")
    put(model, "bypassed", None, key="s/unknown")

    assert the(model).bypasses == 2
    assert [b.start_ms for b in model.bypasses() if b.stream_id == "s"] == [T0 + 2 * MIN, T0]


def test_the_replay_command_names_the_window() -> None:
    view = BypassView("my stream", T0, T0 + MIN, 3, T0, T0, None)

    assert view.replay_command() == (
        "tidemark replay 'my stream' --from 2026-11-29T10:00:00Z --to 2026-11-29T10:01:00Z"
    )


def test_views_are_copies(model: ReadModel) -> None:
    put(model, "control", upsert(params={"a": [1]}))
    put(model, "results", nack(T0))
    view = the(model)
    assert view.config is not None and view.last_error is not None
    view.config["params"]["a"].append(2)
    view.last_error["kind"] = "changed"
    view.paused = True

    config = the(model).config
    assert config is not None and config["params"] == {"a": [1]}
    assert the(model).last_error == {"kind": "no_data", "message": f"no_data at {T0}"}
    assert not the(model).paused


def test_reads_and_applies_from_two_threads(model: ReadModel) -> None:
    def write() -> None:
        for i in range(300):
            put(model, "control", upsert(f"s{i}"))
            put(model, "bypassed", bypass(T0 + i, f"s{i}"), key=f"s{i}/{T0 + i}")

    writer = threading.Thread(target=write)
    writer.start()
    while writer.is_alive():
        assert len(model.streams()) >= 0 and len(model.bypasses()) >= 0
    writer.join()

    assert len(model.streams()) == 300 and len(model.bypasses()) == 300


@pytest.mark.broker
def test_refresh_reads_every_topic_then_only_what_is_new(kafka: KafkaSettings, unique: str) -> None:
    topics = Topics(f"rm-{unique}")
    create_topics(kafka, topics.specs(partitions=3, replication=1))
    producer = Producer(kafka.producer())

    def send(topic: str, value: Any, key: str) -> None:
        raw = None if value is None else json.dumps(value).encode()
        producer.produce(f"{topics.prefix}.{topic}", raw, key.encode())

    for name in ("a", "b", "c"):
        send("control", upsert(name), name)
    send("commits", {**commit(T0 + MIN), "stream_id": "b"}, "b")
    send("bypassed", bypass(T0, "c"), f"c/{T0}")
    producer.flush(10)

    rm = ReadModel(kafka, topics.prefix)
    try:
        rm.refresh(timeout_s=20)
        assert rm.caught_up
        assert [v.stream_id for v in rm.streams()] == ["a", "b", "c"]
        assert the(rm, "b").downstream_ms == T0 + MIN
        assert the(rm, "c").bypasses == 1

        send("control", {"type": "delete", "stream_id": "a"}, "a")
        send("bypassed", None, f"c/{T0}")
        producer.flush(10)
        rm.refresh(timeout_s=20)

        assert [v.stream_id for v in rm.streams()] == ["b", "c"]
        assert rm.bypasses() == []
        rm.refresh(timeout_s=20)  # nothing new: returns at once
        assert rm.caught_up
    finally:
        rm.close()


@pytest.mark.broker
def test_refresh_applies_topics_in_the_order_they_were_written(
    kafka: KafkaSettings, unique: str
) -> None:
    """A stream deleted and made again (as `make run` does): the delete on `control` must not
    wipe the new incarnation's commits, whichever topic the reader happens to read first."""
    topics = Topics(f"rm-{unique}")
    create_topics(kafka, topics.specs(partitions=3, replication=1))
    producer = Producer(kafka.producer())
    base = time.time_ns() // 1_000_000 - 60_000

    def send(topic: str, value: Any, at_ms: int) -> None:
        producer.produce(f"{topics.prefix}.{topic}", json.dumps(value).encode(), b"s",
                         timestamp=at_ms)  # fmt: skip

    send("control", upsert("s"), base)
    send("commits", {**commit(T0 + MIN), "stream_id": "s"}, base + 1)
    send("control", {"type": "delete", "stream_id": "s"}, base + 2)
    send("control", upsert("s"), base + 3)
    send("commits", {**commit(T0 + 5 * MIN), "stream_id": "s"}, base + 4)
    producer.flush(10)
    rm = ReadModel(kafka, topics.prefix)
    try:
        rm.refresh(timeout_s=20)
        assert the(rm, "s").downstream_ms == T0 + 5 * MIN
    finally:
        rm.close()


def test_refresh_fails_fast_without_a_broker(model: ReadModel) -> None:
    with pytest.raises(BrokerUnavailable, match=r"127\.0\.0\.1:1\b"):
        model.refresh(timeout_s=1)


def test_outputs_of_a_deleted_stream_do_not_carry_over_to_its_re_creation(
    model: ReadModel,
) -> None:
    """A delete is processed by the coordinator a moment after it is written: a commit, task or
    nack it emitted for the old stream in between comes after the delete in time order. The
    stream re-created later (here to redo the past, from an earlier start) must not inherit it:
    `downstream_ms` only moves forward, so an old mark would hide the new progress for good."""
    put(model, "control", upsert(start_ms=T0 + 60 * MIN))
    put(model, "commits", commit(T0 + 61 * MIN))
    put(model, "control", {"type": "delete", "stream_id": "s"})
    put(model, "commits", commit(T0 + 62 * MIN))  # the old stream, before the delete applied
    put(model, "tasks", task(T0 + 62 * MIN, attempt=2))
    put(model, "results", nack(T0 + 62 * MIN))
    put(model, "control", {"type": "pause", "stream_id": "s"})  # rejected: unknown stream

    put(model, "control", upsert(start_ms=T0))  # re-created, from an earlier start
    view = the(model)
    assert (view.downstream_ms, view.last_commit_ms, view.window) == (None, None, None)
    assert (view.attempt, view.last_error, view.paused) == (0, None, False)
    assert view.lag_ms(T0 + 10 * MIN) == 10 * MIN
    assert view.state(T0 + MIN) == "live"

    put(model, "commits", commit(T0 + MIN))  # the new stream's progress shows
    assert the(model).downstream_ms == T0 + MIN


def test_before_the_first_commit_lag_counts_from_start_truncated_to_step(model: ReadModel) -> None:
    """The coordinator starts a stream at start_ms truncated to step_ms (its first window
    starts there), so that is where progress stands until the first commit."""
    put(model, "control", upsert(start_ms=T0 + 10_000, window_ms=15_000, step_ms=15_000))
    assert the(model).lag_ms(T0 + MIN) == MIN


@pytest.mark.broker
def test_refresh_reads_committed_transactions_only_and_ends_at_the_commit_marker(
    kafka: KafkaSettings, unique: str
) -> None:
    """The coordinator writes its outputs in transactions: an aborted one never shows, a
    committed one does, and a partition that ends in a commit marker (an offset that is never
    delivered) counts as read, so `caught_up` holds; an open transaction is not waited for."""
    topics = Topics(f"rm-{unique}")
    create_topics(kafka, topics.specs(partitions=1, replication=1))
    producer = Producer(kafka.producer(**{"transactional.id": f"rm-{unique}"}))
    producer.init_transactions(10)

    def transaction(downstream_ms: int) -> None:
        producer.begin_transaction()
        value = {**commit(downstream_ms), "stream_id": "s"}
        producer.produce(topics.commits, json.dumps(value).encode(), b"s")

    transaction(T0 + 9 * MIN)
    producer.abort_transaction(10)
    transaction(T0 + MIN)
    producer.commit_transaction(10)
    rm = ReadModel(kafka, topics.prefix)
    try:
        rm.refresh(timeout_s=20)
        assert rm.caught_up
        assert the(rm, "s").downstream_ms == T0 + MIN

        transaction(T0 + 2 * MIN)  # left open
        producer.flush(10)
        rm.refresh(timeout_s=20)
        assert rm.caught_up  # at the last stable offset, not behind the open transaction
        assert the(rm, "s").downstream_ms == T0 + MIN
        producer.commit_transaction(10)
        rm.refresh(timeout_s=20)
        assert rm.caught_up
        assert the(rm, "s").downstream_ms == T0 + 2 * MIN
    finally:
        rm.close()
