"""The confluent engine's view interval: at most one `streams` view per stream per interval, the
deferred one published at the interval's end, and by a new owner if the old one did not."""

from __future__ import annotations

from typing import Any

import pytest

from streams.coordinator.confluent import delivery as views_module
from streams.coordinator.record import Record, stored_summary

from .fakes import Driver, ack, at

SID = "cluster-a"
STREAMS = "tidemark.streams"
INTERVAL_MS = 1_000


def views(d: Driver) -> list[dict[str, Any] | None]:
    return [None if s.value is None else s.json() for s in d.emitter.on(STREAMS)]


def catching_up() -> tuple[Driver, dict[str, Any]]:
    """A stream far behind, its first window dispatched and its view published at 10:00:00."""
    d = Driver(transactional=True, checkpoint_each=False, view_interval_ms=INTERVAL_MS)
    d.assign(SID)
    d.upsert(SID, at(10, 0), start_ms=at(9, 0))
    d.checkpoint(at(10, 0))
    (task,) = d.tasks()
    assert [v["attempt"] for v in views(d) if v is not None] == [1]
    d.emitter.clear()
    return d, task


def test_a_change_within_the_interval_is_published_at_its_end() -> None:
    d, task = catching_up()
    d.result(ack(task), at(10, 0, 0, 400))
    d.checkpoint(at(10, 0, 0, 400))
    assert views(d) == [] and len(d.commits()) == 1  # the commit is not deferred
    assert not d.processor.dirty(at(10, 0, 0, 999))
    assert d.processor.dirty(at(10, 0, 1))  # the engine commits for the deferred view
    d.checkpoint(at(10, 0, 1))
    (view,) = views(d)
    assert view is not None and view["downstream_ms"] == at(9, 1)
    d.emitter.clear()
    d.checkpoint(at(10, 0, 5))
    assert views(d) == []  # published once


def test_changes_after_the_interval_go_out_at_once_with_the_latest_state() -> None:
    d, task = catching_up()
    d.result(ack(task), at(10, 0, 0, 400))
    d.checkpoint(at(10, 0, 0, 400))
    (task,) = d.tasks()
    d.result(ack(task), at(10, 0, 0, 700))
    d.checkpoint(at(10, 0, 0, 700))
    assert views(d) == []
    d.checkpoint(at(10, 0, 1, 100))
    (view,) = views(d)  # both changes in one view
    assert view is not None and view["downstream_ms"] == at(9, 2)
    (task,) = [t for t in d.tasks() if t["start_ms"] == at(9, 2)]
    d.emitter.clear()
    d.result(ack(task), at(10, 0, 2, 200))
    d.checkpoint(at(10, 0, 2, 200))
    (view,) = views(d)
    assert view is not None and view["downstream_ms"] == at(9, 3)


def test_a_new_owner_publishes_the_view_its_predecessor_deferred() -> None:
    d, task = catching_up()
    d.result(ack(task), at(10, 0, 0, 400))
    d.checkpoint(at(10, 0, 0, 400))  # the view deferred, then the process is killed
    raw = d.store.data[SID]
    summary = stored_summary(raw)
    assert summary is not None and summary.view_owed
    assert Record.decode(raw).view_owed
    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 0, 0, 500))  # the rebuild notes the owed view
    assert again.processor.dirty(at(10, 0, 0, 500))
    again.checkpoint(at(10, 0, 0, 500))
    (view,) = views(again)
    assert view is not None and view["downstream_ms"] == at(9, 1)


def test_a_stream_whose_view_went_out_owes_nothing_to_a_new_owner() -> None:
    d, _ = catching_up()
    summary = stored_summary(d.store.data[SID])
    assert summary is not None and not summary.view_owed
    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 0, 0, 500))
    again.checkpoint(at(10, 0, 0, 500))
    assert views(again) == []


def test_a_delete_is_never_deferred() -> None:
    d, _ = catching_up()
    d.control({"type": "delete", "stream_id": SID}, at(10, 0, 0, 100))
    d.checkpoint(at(10, 0, 0, 100))
    assert views(d) == [None]
    d.checkpoint(at(10, 0, 2))
    assert views(d) == [None]  # and its deferred view, if any, is not sent after it


def test_a_clock_stepped_back_behind_the_last_view_publishes_at_once() -> None:
    d, task = catching_up()
    d.result(ack(task), at(9, 59, 59))
    d.checkpoint(at(9, 59, 59))
    (view,) = views(d)
    assert view is not None and view["downstream_ms"] == at(9, 1)


def test_a_summary_from_before_the_interval_still_reads() -> None:
    d, _ = catching_up()
    raw = d.store.data[SID]
    old = raw[: raw.rfind(b",")] + b"]}"  # the ten members stored before views could wait
    summary = stored_summary(old)
    assert summary is not None and not summary.view_owed
    assert summary == stored_summary(raw)


def test_a_new_owner_publishes_owed_views_a_slice_per_checkpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a takeover most live streams are owed a view: they go out a slice per checkpoint,
    so that no transaction holds them all, and the engine is told to commit until they are."""
    monkeypatch.setattr(views_module, "DUE_VIEWS_PER_CHECKPOINT", 2)
    d = Driver(transactional=True, checkpoint_each=False, view_interval_ms=INTERVAL_MS)
    ids = [f"cluster-{i}" for i in range(5)]
    d.assign(*ids)
    for sid in ids:
        d.upsert(sid, at(10, 0), start_ms=at(9, 0))
    d.checkpoint(at(10, 0))
    for task in d.tasks():
        d.result(ack(task), at(10, 0, 0, 400))
    d.checkpoint(at(10, 0, 0, 400))  # every view deferred, then the process is killed
    again = d.restart()
    again.assign(*ids)
    again.tick(at(10, 0, 0, 500))
    published: list[int] = []
    for ms in range(600, 1000, 100):
        assert again.processor.dirty(at(10, 0, 0, ms)) == (sum(published) < len(ids))
        again.emitter.clear()
        again.checkpoint(at(10, 0, 0, ms))
        published.append(len(views(again)))
    assert published == [2, 2, 1, 0]
