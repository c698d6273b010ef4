"""The replay lane's edges through the in-process Processor (issue 25, defects 1 to 5).

cluster-a's first window (10:00, 10:01] is bypassed at once (a non-retryable nack), then
replayed; the checks are those of a consumer of `commits` (`tests/support/commits.py`) and of
the replay state left behind.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.commits import check_chain

from .fakes import T0, Driver, ack, at, nack

SID = "cluster-a"
BOTH_ENGINES = pytest.mark.parametrize("transactional", [False, True], ids=["faust", "confluent"])
REPLAY = {"type": "replay", "stream_id": SID, "from_ms": T0, "to_ms": at(10, 1)}


def _driver(transactional: bool, **kw: Any) -> Driver:
    """cluster-a created at 10:00:30 and owned. Transactional, the test says when a
    transaction commits (`checkpoint`); at least once, commits are coalesced per minute, so a
    commit may wait as it waits for the checkpoint."""
    d = Driver(transactional=transactional, checkpoint_each=False, flush_ms=60_000, **kw)
    d.upsert(SID, at(10, 0, 30), non_retryable=["bad_params"])
    d.assign(SID)
    d.tick(at(10, 0, 30))
    return d


def _bypass_first(d: Driver, now_ms: int = at(10, 1, 5)) -> dict[str, Any]:
    """Dispatch (10:00, 10:01] and nack it non-retryable: bypassed. Returns its live task."""
    d.tick(at(10, 1))
    (task,) = [t for t in d.tasks() if t["start_ms"] == T0]
    d.result(nack(task, "bad_params"), now_ms)
    assert [s.json()["start_ms"] for s in d.bypassed()] == [T0]
    return task


def _replay_task(d: Driver) -> dict[str, Any]:
    (task,) = [t for t in d.tasks() if t.get("replay")]
    return task


def _listed(d: Driver) -> list[Any]:
    raw = d.replay_store.data.get(SID)
    return [] if raw is None else json.loads(raw)["listed"]


def _replayed(d: Driver) -> list[dict[str, Any]]:
    return [c for c in d.commits() if c["windows"][0]["reason"] == "replayed"]


def _checkpoint(d: Driver, now_ms: int) -> None:
    if d.transactional:
        d.checkpoint(now_ms)


# -- defect 1: a replayed commit keeps the chain ---------------------------------------------------


@BOTH_ENGINES
def test_a_replay_ack_beside_a_waiting_live_commit_keeps_the_chain(transactional: bool) -> None:
    """The issue's order: the bypass announced, then a live ack and a replay ack before the
    next checkpoint (or flush). The replayed commit must not announce the live ack's mark
    before the live commit that moves it there."""
    d = _driver(transactional)
    _bypass_first(d)
    _checkpoint(d, at(10, 1, 6))  # (10:00, 10:01] bypass is on `commits`
    d.tick(at(10, 2))
    (live,) = [t for t in d.tasks() if t["start_ms"] == at(10, 1)]
    d.control(REPLAY, at(10, 2, 1))
    replay = _replay_task(d)
    d.result(ack(live), at(10, 2, 2))  # waits for the checkpoint (or the flush interval)
    d.result(ack(replay), at(10, 2, 3))
    _checkpoint(d, at(10, 2, 4))
    d.tick(at(10, 3, 3))  # at least once: the flush interval has passed
    commits = d.commits()
    check_chain(commits)
    assert [(c["previous_ms"], c["downstream_ms"], c["windows"][0]["reason"]) for c in commits] == [
        (T0, at(10, 1), "bypass"),
        (at(10, 1), at(10, 1), "replayed"),
        (at(10, 1), at(10, 2), "ack"),
    ]


@BOTH_ENGINES
def test_a_replay_acked_before_its_bypass_went_out_follows_the_bypass(transactional: bool) -> None:
    """Bypass, replay and its ack in one transaction: the bypass's commit is flushed first, so
    the replayed window never comes before its bypass (at least once, the bypass went out at
    once: the first commit after a quiet interval)."""
    d = _driver(transactional)
    _bypass_first(d)
    d.control(REPLAY, at(10, 1, 6))
    d.result(ack(_replay_task(d)), at(10, 1, 7))
    _checkpoint(d, at(10, 1, 8))
    commits = d.commits()
    check_chain(commits)
    assert [(c["previous_ms"], c["downstream_ms"], c["windows"][0]["reason"]) for c in commits] == [
        (T0, at(10, 1), "bypass"),
        (at(10, 1), at(10, 1), "replayed"),
    ]


# -- defect 2: a replay ack's ack_ms is checked ----------------------------------------------------


@BOTH_ENGINES
@pytest.mark.parametrize(
    "ack_ms", [T0, 0, at(10, 0, 30), at(10, 1, 1)], ids=["start", "zero", "partial", "after"]
)
def test_a_replay_ack_short_of_or_outside_its_window_is_rejected_and_keeps_it_listed(
    transactional: bool, ack_ms: int
) -> None:
    d = _driver(transactional)
    _bypass_first(d)
    d.control(REPLAY, at(10, 2))
    replay = _replay_task(d)
    _checkpoint(d, at(10, 2))
    d.emitter.clear()
    d.result(ack(replay, ack_ms), at(10, 2, 1))
    _checkpoint(d, at(10, 2, 1))
    (rejected,) = d.rejected()
    assert rejected["reason"].startswith("ack_ms")
    assert _replayed(d) == [] and d.bypassed() == []  # no commit, no tombstone
    assert [w[:2] for w in _listed(d)] == [[T0, at(10, 1)]]
    d.result(ack(replay), at(10, 2, 2))  # the whole window: replayed
    _checkpoint(d, at(10, 2, 2))
    assert [c["windows"][0]["end_ms"] for c in _replayed(d)] == [at(10, 1)]
    assert [(s.key, s.value) for s in d.bypassed()] == [(f"{SID}/{T0}".encode(), None)]


# -- defect 3: a replay ack of an earlier incarnation ----------------------------------------------


@BOTH_ENGINES
def test_a_replay_ack_of_another_incarnation_is_rejected(transactional: bool) -> None:
    d = _driver(transactional)
    live = _bypass_first(d)
    d.control(REPLAY, at(10, 2))
    replay = _replay_task(d)
    d.emitter.clear()
    d.result(ack(replay, incarnation=live["incarnation"] + 1), at(10, 2, 1))
    _checkpoint(d, at(10, 2, 1))
    (rejected,) = d.rejected()
    assert rejected["reason"].startswith("incarnation")
    assert _replayed(d) == [] and len(_listed(d)) == 1
    d.result(ack(replay, incarnation=live["incarnation"]), at(10, 2, 2))
    _checkpoint(d, at(10, 2, 2))
    assert len(_replayed(d)) == 1 and _listed(d) == []
    assert replay["incarnation"] == live["incarnation"]  # a replay task carries it (the wire)


# -- defect 4: replay task ids never equal live ones -----------------------------------------------


@BOTH_ENGINES
def test_a_replay_after_a_shutdown_nack_is_numbered_after_every_live_attempt(
    transactional: bool,
) -> None:
    """A shutdown nack is a dispatch without a failure: attempt 1 shut down, attempt 2 bypassed
    with 1 failure. The replay must be attempt 3, so that a late nack of live attempt 2 is not
    taken for it and its own ack is not a duplicate."""
    d = _driver(transactional)
    d.tick(at(10, 1))
    (first,) = d.tasks()
    d.result(nack(first, "shutdown"), at(10, 1, 1))
    d.tick(at(10, 1, 2))
    (second,) = [t for t in d.tasks() if t["attempt"] == 2]
    d.result(nack(second, "bad_params"), at(10, 1, 3))
    assert [s.json()["attempts"] for s in d.bypassed()] == [1]
    d.control(REPLAY, at(10, 2))
    replay = _replay_task(d)
    live_ids = {t["task_id"] for t in d.tasks() if not t.get("replay")}
    assert replay["task_id"] not in live_ids and replay["attempt"] == 3
    d.result(nack(second, "bad_params"), at(10, 2, 1))  # the live attempt's nack, read again
    d.result(ack(replay), at(10, 2, 2))
    _checkpoint(d, at(10, 2, 2))
    (replayed,) = _replayed(d)
    assert replayed["windows"][0]["attempts"] == 3 and _listed(d) == []


# -- defect 5: the takeover grace covers replay deadlines ------------------------------------------


@BOTH_ENGINES
def test_a_new_owner_does_not_time_out_a_replay_whose_ack_waits_on_results(
    transactional: bool,
) -> None:
    d = _driver(transactional, mono_ms=0, catch_up_max_ms=45_000)
    d.caught_up(SID)
    _bypass_first(d)
    d.control(REPLAY, at(10, 2))
    replay = _replay_task(d)  # deadline 10:03 (a 60 s task timeout)
    _checkpoint(d, at(10, 2))
    d.emitter.deliver_all()
    again = d.restart()
    again.mono_ms = 1_000_000
    again.assign(SID)
    again.tick(at(10, 10))  # the first tick, past the deadline, before `results` are read
    assert again.processor.stats["replay_failures"] == 0
    again.result(ack(replay), at(10, 10, 1))
    again.caught_up(SID)
    again.tick(at(10, 10, 2))
    _checkpoint(again, at(10, 10, 2))
    assert len(_replayed(again)) == 1 and _listed(again) == []


# -- a replay in flight ahead of the live lane (stored by a coordinator before issue 25) ----------


@BOTH_ENGINES
def test_a_replay_ack_ahead_of_the_live_lane_is_ignored_not_an_error(transactional: bool) -> None:
    d = _driver(transactional)
    _bypass_first(d)
    _checkpoint(d, at(10, 1, 6))
    ahead = [at(10, 5), at(10, 6), 1, at(10, 6), at(10, 6), ["x", ""], False, 2, at(10, 30)]
    d.replay_store.data[SID] = json.dumps({"v": 1, "stream_id": SID, "listed": [ahead]}).encode()
    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 1, 7))
    task = {"stream_id": SID, "start_ms": at(10, 5), "end_ms": at(10, 6), "attempt": 2}
    again.result(ack(task), at(10, 1, 8))
    _checkpoint(again, at(10, 1, 8))
    assert again.processor.stats["early"] == 1 and again.processor.stats["stream_errors"] == 0
    assert _replayed(again) == [] and len(_listed(again)) == 1
