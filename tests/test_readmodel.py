"""The read model: pure `apply` over `streams` and `bypassed`, and one `refresh` on the broker."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from rich.console import Console

from streams.commands.views import streams_table
from streams.errors import BrokerUnavailable
from streams.kafka.admin import create_topics
from streams.kafka.settings import KafkaSettings
from streams.readmodel import TOPICS, BypassView, ReadModel, ReadView
from streams.topics import Topics

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


def view(stream_id: str = "s", **fields: Any) -> dict[str, Any]:
    """A `streams` value as the coordinator publishes it (streams.wire.encode_view)."""
    config = {
        "stream_id": stream_id,
        "start_ms": T0,
        "window_ms": 60_000,
        "step_ms": 15_000,
        "delay_ms": 0,
        "task_timeout_ms": 60_000,
        "bypass_after_ms": 300_000,
        "retry": {"strategy": "fixed", "interval_ms": 60_000},
        "max_attempts": None,
        "non_retryable": [],
        "max_in_flight": 1,
        "params": {},
        **fields.pop("config", {}),
    }
    return {
        "stream_id": stream_id,
        "config": config,
        "status": "live",
        "downstream_ms": T0,
        "window": {"start_ms": T0, "end_ms": T0 + MIN},
        "attempt": 0,
        "last_error": None,
        "bypasses": 0,
        "committed_ms": None,
        "incarnation": 7,
        "changed_ms": T0 + MIN,
        **fields,
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


def the(rm: ReadModel, stream_id: str = "s") -> ReadView:
    found = rm.stream(stream_id)
    assert found is not None
    return found


def test_it_reads_two_compacted_topics_and_no_history() -> None:
    assert TOPICS == ("streams", "bypassed")


def test_a_view_shows_the_stream_with_its_full_config(model: ReadModel) -> None:
    put(model, "streams", view(config={"window_ms": 30_000, "params": {"q": "up"}}))
    shown = the(model)
    assert shown.config["window_ms"] == 30_000 and shown.config["params"] == {"q": "up"}
    assert (shown.downstream_ms, shown.window, shown.attempt) == (T0, (T0, T0 + MIN), 0)
    assert (shown.last_commit_ms, shown.changed_ms, shown.incarnation) == (None, T0 + MIN, 7)
    assert [v.stream_id for v in model.streams()] == ["s"]


def test_a_later_view_replaces_the_earlier_one_and_a_tombstone_removes_it(
    model: ReadModel,
) -> None:
    put(model, "streams", view(downstream_ms=T0 + MIN, committed_ms=T0 + MIN + 5))
    put(model, "streams", view(status="paused", downstream_ms=T0 + 2 * MIN))
    shown = the(model)
    assert shown.paused and shown.state(T0 + 10 * MIN) == "paused"
    assert shown.downstream_ms == T0 + 2 * MIN
    put(model, "streams", None, key="s")
    assert model.stream("s") is None and model.streams() == []


def test_a_re_created_stream_shows_only_its_new_self(model: ReadModel) -> None:
    """Delete and re-create to redo the past: the tombstone, then the new incarnation's view,
    whose progress is behind the old one's."""
    error = {"kind": "no_data", "message": "x"}
    put(model, "streams", view(status="retrying", downstream_ms=T0 + 60 * MIN, last_error=error))
    put(model, "streams", None, key="s")
    put(model, "streams", view(incarnation=8))
    shown = the(model)
    assert (shown.downstream_ms, shown.last_error, shown.incarnation) == (T0, None, 8)
    assert shown.state(T0 + MIN) == "live"


def test_invalid_views_are_ignored_like_the_coordinator_never_writes_them(
    model: ReadModel,
) -> None:
    put(model, "streams", view(), key="other")  # a key that is not its stream
    put(model, "streams", b"{not json", key="s")
    put(model, "streams", view(status="asleep"))
    put(model, "streams", view(config={"window_ms": 20_000}))  # not a multiple of step_ms
    put(model, "streams", None)  # a tombstone without a key
    assert model.streams() == []


def test_states_live_and_catching_up_are_told_by_the_lag_at_reading(model: ReadModel) -> None:
    put(model, "streams", view(config={"delay_ms": 10_000}))
    shown = the(model)
    assert shown.lag_ms(T0 + MIN) == MIN
    assert shown.state(T0 + 2 * MIN + 10_000) == "live"  # at 2 windows + delay
    assert shown.state(T0 + 2 * MIN + 10_001) == "catching up"
    put(model, "streams", view(status="retrying"))
    assert the(model).state(T0 + 60 * MIN) == "retrying"
    put(model, "streams", view(status="finished"))
    assert the(model).state(T0 + 60 * MIN) == "finished"


def test_a_live_view_says_when_it_falls_behind(model: ReadModel) -> None:
    put(model, "streams", view(config={"delay_ms": 10_000}))
    after = the(model).catching_up_after_ms()
    assert after == T0 + 2 * MIN + 10_000
    assert the(model).state(after) == "live" and the(model).state(after + 1) == "catching up"
    for status in ("paused", "retrying", "finished"):
        put(model, "streams", view(status=status))
        assert the(model).catching_up_after_ms() is None


def test_a_brief_view_shows_what_the_full_one_does_less_the_config(model: ReadModel) -> None:
    error = {"kind": "no_data", "message": "x"}
    for status in ("live", "retrying", "paused", "finished"):
        put(model, "streams", view(status=status, last_error=error, config={"delay_ms": 5_000}))
        put(model, "bypassed", bypass(T0), key=f"s/{T0}")
        (brief,), _ = model.changes()
        full = the(model)
        for name in ("stream_id", "paused", "downstream_ms", "last_commit_ms", "window",
                     "attempt", "last_error", "bypasses"):  # fmt: skip
            assert getattr(brief, name) == getattr(full, name), name
        assert brief.catching_up_after_ms() == full.catching_up_after_ms()
        for now in (T0, T0 + 2 * MIN + 5_000, T0 + 2 * MIN + 5_001):
            assert (brief.state(now), brief.lag_ms(now)) == (full.state(now), full.lag_ms(now))
    assert not hasattr(brief, "config")


def test_changes_are_every_stream_first_then_only_what_changed(model: ReadModel) -> None:
    put(model, "streams", view("a"))
    put(model, "streams", view("b"))
    changed, removed = model.changes()
    assert sorted(v.stream_id for v in changed) == ["a", "b"] and removed == []
    assert model.changes() == ([], [])
    put(model, "streams", view("a", downstream_ms=T0 + MIN))
    put(model, "streams", None, key="b")  # deleted
    put(model, "streams", view("c"))
    put(model, "bypassed", bypass(T0, "d"), key=f"d/{T0}")  # of no stream shown
    changed, removed = model.changes()
    assert sorted((v.stream_id, v.downstream_ms) for v in changed) == [("a", T0 + MIN), ("c", T0)]
    assert sorted(removed) == ["b", "d"]
    put(model, "bypassed", bypass(T0, "c"), key=f"c/{T0}")  # its listed bypasses change
    changed, _ = model.changes()
    assert [(v.stream_id, v.bypasses) for v in changed] == [("c", 1)]
    put(model, "bypassed", None, key=f"c/{T0}")
    changed, _ = model.changes()
    assert [(v.stream_id, v.bypasses) for v in changed] == [("c", 0)]


def test_bypassed_windows_are_listed_until_a_tombstone(model: ReadModel) -> None:
    put(model, "streams", view(bypasses=2))
    put(model, "bypassed", bypass(T0), key=f"s/{T0}")
    put(model, "bypassed", bypass(T0 + 2 * MIN), key=f"s/{T0 + 2 * MIN}")
    put(model, "bypassed", bypass(T0, "x"), key=f"s/{T0}")  # the key is not its window
    assert the(model).bypasses == 2 and the(model).bypassed_total == 2
    assert [b.start_ms for b in model.bypasses()] == [T0 + 2 * MIN, T0]  # most recent first
    put(model, "bypassed", None, key=f"s/{T0 + 2 * MIN}")
    assert the(model).bypasses == 1 and the(model).bypassed_total == 2
    assert model.bypasses(limit=5)[0].replay_command().startswith("tidemark replay s ")


def test_the_replay_command_names_the_window() -> None:
    listed = BypassView("my stream", T0, T0 + MIN, 3, T0, T0, None)
    assert listed.replay_command() == (
        "tidemark replay 'my stream' --from 2026-11-29T10:00:00Z --to 2026-11-29T10:01:00Z"
    )


def test_views_are_copies(model: ReadModel) -> None:
    error = {"kind": "no_data", "message": "x"}
    put(model, "streams", view(config={"params": {"a": [1]}}, last_error=error))
    shown = the(model)
    assert shown.last_error is not None
    shown.config["params"]["a"].append(2)
    shown.last_error["kind"] = "changed"
    shown.status = "paused"

    again = the(model)
    assert again.config["params"] == {"a": [1]} and again.last_error == error
    assert not again.paused


def test_reads_and_applies_from_two_threads(model: ReadModel) -> None:
    def write() -> None:
        for i in range(300):
            put(model, "streams", view(f"s{i}"))
            put(model, "bypassed", bypass(T0 + i, f"s{i}"), key=f"s{i}/{T0 + i}")

    writer = threading.Thread(target=write)
    writer.start()
    while writer.is_alive():
        assert len(model.streams()) >= 0 and len(model.bypasses()) >= 0
    writer.join()

    assert len(model.streams()) == 300 and len(model.bypasses()) == 300


def test_refresh_fails_fast_without_a_broker(model: ReadModel) -> None:
    with pytest.raises(BrokerUnavailable, match=r"127\.0\.0\.1:1\b"):
        model.refresh(timeout_s=1)


@pytest.mark.broker
def test_refresh_reads_both_topics_then_only_what_is_new(kafka: KafkaSettings, unique: str) -> None:
    topics = Topics(f"rm-{unique}")
    create_topics(kafka, topics.specs(partitions=3, replication=1))
    producer = Producer(kafka.producer())

    def send(topic: str, value: Any, key: str) -> None:
        raw = None if value is None else json.dumps(value).encode()
        producer.produce(f"{topics.prefix}.{topic}", raw, key.encode())

    for name in ("a", "b", "c"):
        send("streams", view(name), name)
    send("streams", view("b", downstream_ms=T0 + MIN), "b")
    send("bypassed", bypass(T0, "c"), f"c/{T0}")
    assert producer.flush(60) == 0, "records left unsent after 60 s"

    rm = ReadModel(kafka, topics.prefix)
    try:
        rm.refresh(timeout_s=20)
        assert rm.caught_up
        assert [v.stream_id for v in rm.streams()] == ["a", "b", "c"]
        assert the(rm, "b").downstream_ms == T0 + MIN
        assert the(rm, "c").bypasses == 1

        send("streams", None, "a")
        send("bypassed", None, f"c/{T0}")
        assert producer.flush(60) == 0, "records left unsent after 60 s"
        rm.refresh(timeout_s=20)

        assert [v.stream_id for v in rm.streams()] == ["b", "c"]
        assert rm.bypasses() == []
        rm.refresh(timeout_s=20)  # nothing new: returns at once
        assert rm.caught_up
    finally:
        rm.close()


@pytest.mark.broker
def test_refresh_reads_committed_transactions_only_and_ends_at_the_commit_marker(
    kafka: KafkaSettings, unique: str
) -> None:
    """The confluent engine writes views in transactions: an aborted one never shows, a
    committed one does, and a partition that ends in a commit marker (an offset that is never
    delivered) counts as read, so `caught_up` holds; an open transaction is not waited for."""
    topics = Topics(f"rm-{unique}")
    create_topics(kafka, topics.specs(partitions=1, replication=1))
    producer = Producer(kafka.producer(**{"transactional.id": f"rm-{unique}"}))
    producer.init_transactions(10)

    def transaction(downstream_ms: int) -> None:
        producer.begin_transaction()
        value = view(downstream_ms=downstream_ms)
        producer.produce(topics.streams, json.dumps(value).encode(), b"s")

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
        assert producer.flush(60) == 0, "records left unsent after 60 s"
        rm.refresh(timeout_s=20)
        assert rm.caught_up  # at the last stable offset, not behind the open transaction
        assert the(rm, "s").downstream_ms == T0 + MIN
        producer.commit_transaction(10)
        # commit_transaction returns once the coordinator has the commit; the partition's
        # marker (and so the last stable offset) follows a moment later.
        deadline = time.monotonic() + 10
        while True:
            rm.refresh(timeout_s=20)
            assert rm.caught_up
            if the(rm, "s").downstream_ms != T0 + MIN or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert the(rm, "s").downstream_ms == T0 + 2 * MIN
    finally:
        rm.close()


def test_read_all_keeps_reading_while_records_come_and_stops_when_they_stop(
    model: ReadModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large cluster is read to its end however long that takes; a stalled read ends."""
    batches = [[view(f"s{i}") for i in range(3)], [view("s3")], []]
    calls: list[float] = []

    def refresh(timeout_s: float) -> None:  # what a read that ran out of time does
        calls.append(timeout_s)
        batch = batches.pop(0)
        for value in batch:
            put(model, "streams", value)
        model.records_read += len(batch)
        model.caught_up = False

    monkeypatch.setattr(model, "refresh", refresh)
    model.read_all(7.0)
    assert calls == [7.0, 7.0, 7.0] and len(model.streams()) == 4 and not model.caught_up

    def caught_up(timeout_s: float) -> None:
        calls.append(timeout_s)
        model.caught_up = True

    monkeypatch.setattr(model, "refresh", caught_up)
    model.read_all(7.0)
    assert len(calls) == 4


def test_a_stream_catching_up_shows_when_it_is_live_again_at_its_measured_pace(
    model: ReadModel,
) -> None:
    # An hour behind, progressing 3 minutes a minute: it gains 2 minutes a minute.
    start = T0 - 60 * MIN
    for minute in range(0, 6):
        at = T0 + minute * MIN
        put(model, "streams", view(downstream_ms=start + 3 * minute * MIN, changed_ms=at))
    shown = the(model)
    assert shown.catch_up_rate == 3.0
    now = T0 + 5 * MIN
    # At 10:05 it is 50 minutes behind; live once within two windows: 48 to gain, 24 min.
    assert shown.live_in_ms(now) == 24 * MIN
    doc = shown.to_json(now)
    assert doc["state"] == "catching up" and doc["catch_up_rate"] == 3.0
    assert doc["live_in_ms"] == 24 * MIN
    # Stalled: the same progress in later views, so it loses ground: no time to show.
    for minute in range(6, 12):
        put(model, "streams", view(downstream_ms=start + 15 * MIN, changed_ms=T0 + minute * MIN))
    stalled = the(model)
    assert stalled.catch_up_rate is not None and stalled.catch_up_rate < 1.0
    assert stalled.live_in_ms(T0 + 11 * MIN) is None
    assert stalled.to_json(T0 + 11 * MIN)["live_in_ms"] is None


def test_a_live_stream_or_a_deleted_one_keeps_no_pace(model: ReadModel) -> None:
    put(model, "streams", view(downstream_ms=T0, changed_ms=T0 + MIN))  # within two windows
    put(model, "streams", view(downstream_ms=T0 + MIN, changed_ms=T0 + 2 * MIN))
    assert the(model).catch_up_rate is None and "catch_up_rate" not in the(model).to_json(T0)
    put(model, "streams", view(downstream_ms=T0 - 60 * MIN, changed_ms=T0))
    put(model, "streams", view(downstream_ms=T0 - 50 * MIN, changed_ms=T0 + MIN))
    assert the(model).catch_up_rate == 10.0
    put(model, "streams", None, key="s")
    put(model, "streams", view(incarnation=8, downstream_ms=T0 - 60 * MIN, changed_ms=T0))
    assert the(model).catch_up_rate is None  # the re-created stream is measured afresh
    changed, _ = model.changes()
    assert [v.catch_up_rate for v in changed] == [None]


def test_the_table_says_when_a_stream_catching_up_is_live_again_or_that_it_does_not_gain(
    model: ReadModel,
) -> None:
    start = T0 - 60 * MIN
    for minute in range(0, 6):
        put(
            model,
            "streams",
            view(downstream_ms=start + 3 * minute * MIN, changed_ms=T0 + minute * MIN),
        )
        put(model, "streams", view("flat", downstream_ms=start, changed_ms=T0 + minute * MIN))
    put(model, "streams", view("new", downstream_ms=start, changed_ms=T0))  # one view: no pace
    console = Console(width=200, record=True)
    console.print(streams_table(model.streams(), T0 + 5 * MIN))
    rows = {line.split()[1]: line for line in console.export_text().splitlines() if "│" in line}
    assert "catching up, live in ~24m" in rows["s"]
    assert "catching up, not gaining" in rows["flat"]
    assert (
        "catching up │" in rows["new"].replace("  ", " ") or rows["new"].count("catching up,") == 0
    )
