"""The `streams` views the Processor publishes: on change only, coalesced, tombstoned on delete."""

from __future__ import annotations

from typing import Any

import pytest

from streams.wire import decode_view

from .fakes import T0, Driver, ack, at, heartbeat, nack

BOTH_ENGINES = pytest.mark.parametrize("transactional", [False, True], ids=["faust", "confluent"])
SID = "cluster-a"
STREAMS = "tidemark.streams"


def views(d: Driver) -> list[dict[str, Any] | None]:
    """Every view sent so far, each checked by the codec against its key (None: a tombstone)."""
    out: list[dict[str, Any] | None] = []
    for sent in d.emitter.on(STREAMS):
        decoded = decode_view(sent.key, sent.value)
        assert decoded.stream_id == SID
        out.append(None if sent.value is None else sent.json())
    return out


def running(transactional: bool, **config: Any) -> tuple[Driver, dict[str, Any]]:
    d = Driver(transactional=transactional)
    d.assign(SID)
    d.upsert(SID, at(10, 0, 30), **config)
    d.tick(at(10, 1))
    (task,) = d.tasks()
    return d, task


@BOTH_ENGINES
def test_a_new_stream_is_published_with_its_config_and_its_first_window(
    transactional: bool,
) -> None:
    d, _ = running(transactional)
    first, dispatched = views(d)
    assert first is not None and dispatched is not None
    assert first["config"]["start_ms"] == T0 and first["status"] == "live"
    assert first["downstream_ms"] == T0 and first["committed_ms"] is None
    assert first["window"] == {"start_ms": T0, "end_ms": at(10, 1)} and first["attempt"] == 0
    assert first["changed_ms"] == at(10, 0, 30)
    assert dispatched["attempt"] == 1 and dispatched["changed_ms"] == at(10, 1)


@BOTH_ENGINES
def test_nothing_is_published_while_nothing_a_reader_sees_changes(transactional: bool) -> None:
    d, task = running(transactional)
    before = len(views(d))
    d.result(heartbeat(task), at(10, 1, 10))
    d.tick(at(10, 1, 20))
    assert len(views(d)) == before


@BOTH_ENGINES
def test_failures_show_as_retrying_then_a_bypass_is_counted(transactional: bool) -> None:
    d, task = running(transactional, max_attempts=2, retry={"strategy": "immediate"})
    d.result(nack(task, "no_data"), at(10, 1, 5))
    retrying = views(d)[-1]
    assert retrying is not None and retrying["status"] == "retrying"
    assert retrying["last_error"] == {"kind": "no_data", "message": f"no_data in {task['task_id']}"}
    d.tick(at(10, 1, 6))
    (_, again) = d.tasks()
    d.result(nack(again, "no_data"), at(10, 1, 7))
    bypassed = views(d)[-1]
    assert bypassed is not None and bypassed["bypasses"] == 1
    assert bypassed["downstream_ms"] == at(10, 1) and bypassed["committed_ms"] == at(10, 1, 7)
    assert bypassed["status"] == "live" and bypassed["last_error"] is None


@BOTH_ENGINES
def test_an_ack_moves_the_view_with_the_commit(transactional: bool) -> None:
    d, task = running(transactional)
    d.result(ack(task), at(10, 1, 1))
    (commit,) = d.commits()
    view = views(d)[-1]
    assert view is not None
    assert view["downstream_ms"] == commit["downstream_ms"] == at(10, 1)
    assert view["committed_ms"] == commit["committed_ms"]


@BOTH_ENGINES
def test_pause_then_delete_then_re_create(transactional: bool) -> None:
    d, _ = running(transactional)
    d.control({"type": "pause", "stream_id": SID}, at(10, 1, 1))
    paused = views(d)[-1]
    assert paused is not None and paused["status"] == "paused"
    d.control({"type": "delete", "stream_id": SID}, at(10, 1, 2))
    assert views(d)[-1] is None
    d.upsert(SID, at(10, 1, 3), start_ms=at(10, 1))
    again = views(d)[-1]
    assert again is not None and again["downstream_ms"] == at(10, 1)
    assert again["incarnation"] != paused["incarnation"] and again["status"] == "live"


def test_transactional_views_are_coalesced_per_stream_per_transaction() -> None:
    d = Driver(transactional=True, checkpoint_each=False)
    d.assign(SID)
    d.upsert(SID, at(10, 0, 30), max_in_flight=3)
    d.tick(at(10, 4))
    for task in d.tasks():
        d.result(ack(task), at(10, 4, 1))
    assert views(d) == []  # nothing before the transaction commits
    d.checkpoint(at(10, 4, 2))
    (view,) = views(d)
    (commit,) = d.commits()
    assert view is not None and view["downstream_ms"] == commit["downstream_ms"] == at(10, 3)
    assert view["changed_ms"] == at(10, 4, 2)


def test_a_delete_and_re_create_in_one_transaction_sends_the_tombstone_first() -> None:
    d = Driver(transactional=True, checkpoint_each=False)
    d.assign(SID)
    d.upsert(SID, at(10, 0, 30))
    d.checkpoint(at(10, 0, 31))
    d.control({"type": "delete", "stream_id": SID}, at(10, 0, 32))
    d.checkpoint(at(10, 0, 33))
    d.upsert(SID, at(10, 0, 34))
    d.control({"type": "delete", "stream_id": SID}, at(10, 0, 35))
    d.upsert(SID, at(10, 0, 36), window_ms=30_000)
    d.checkpoint(at(10, 0, 37))
    first, tombstone, last = views(d)
    assert first is not None and tombstone is None
    assert last is not None and last["config"]["window_ms"] == 30_000


def test_faust_sends_a_view_again_when_its_delivery_failed() -> None:
    d, _ = running(False)
    d.emitter.deliver_all()
    d.control({"type": "pause", "stream_id": SID}, at(10, 1, 1))
    d.emitter.fail_all()
    d.emitter.clear()
    d.tick(at(10, 1, 2))  # the failure woke the stream
    (view,) = views(d)
    assert view is not None and view["status"] == "paused"
    d.control({"type": "delete", "stream_id": SID}, at(10, 1, 3))
    d.emitter.fail_all()
    d.emitter.clear()
    d.tick(at(10, 1, 4))
    assert views(d) == [None]


def test_faust_publishes_every_view_of_a_rebuilt_partition() -> None:
    d, _ = running(False)
    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 1, 1))
    view = views(again)[0]  # what a crash may have left unsent
    assert view is not None and view["window"] == {"start_ms": T0, "end_ms": at(10, 1)}


@BOTH_ENGINES
def test_catching_up_is_told_by_the_lag(transactional: bool) -> None:
    d = Driver(transactional=transactional)
    d.assign(SID)
    d.upsert(SID, at(11, 0))
    view = views(d)[-1]
    assert view is not None and view["status"] == "catching up"
