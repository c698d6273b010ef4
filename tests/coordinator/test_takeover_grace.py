"""Takeover grace, in-process: a new owner times a window out only once it has read the results
waiting for it (or after its bound), so coordinator downtime is not counted against workers."""

from __future__ import annotations

import pytest

from .fakes import Driver, ack, at

SID = "cluster-a"
BOUND_MS = 45_000
BOTH_ENGINES = pytest.mark.parametrize("transactional", [False, True], ids=["faust", "confluent"])


def _down_past_the_deadline(transactional: bool) -> tuple[Driver, dict[str, object]]:
    """A task out at 10:01 (deadline 10:02, max_attempts=1) whose coordinator dies; the new
    owner starts at 10:10 with the worker's ack still unread on `results`."""
    d = Driver(transactional=transactional, mono_ms=0, catch_up_max_ms=BOUND_MS)
    d.assign(SID)
    d.caught_up(SID)
    d.upsert(SID, at(10, 0, 30), max_attempts=1)
    d.tick(at(10, 1))
    (task,) = d.tasks()
    again = d.restart()
    again.mono_ms = 1_000_000  # another process: its own monotonic origin
    again.assign(SID)
    return again, task


@BOTH_ENGINES
def test_an_ack_waiting_on_results_commits_as_ack_not_bypass(transactional: bool) -> None:
    d, task = _down_past_the_deadline(transactional)
    d.tick(at(10, 10))  # the first tick, before the results are read
    assert d.bypassed() == [] and d.processor.stats["timeouts"] == 0
    d.result(ack(task), at(10, 10, 1))  # type: ignore[arg-type]
    d.caught_up(SID)
    d.tick(at(10, 10, 2))
    (commit,) = d.commits()
    assert [w["reason"] for w in commit["windows"]] == ["ack"]
    assert commit["downstream_ms"] == at(10, 1)
    assert d.bypassed() == []


@BOTH_ENGINES
def test_a_passed_deadline_is_suppressed_not_lost_and_counts_once_caught_up(
    transactional: bool,
) -> None:
    d, _ = _down_past_the_deadline(transactional)
    for second in range(1, 4):
        d.tick(at(10, 10, second))
    assert d.bypassed() == []
    d.caught_up(SID)  # no answer was waiting: now the deadline counts
    d.tick(at(10, 10, 5))
    assert d.processor.stats["timeouts"] == 1
    (commit,) = d.commits()
    assert [w["reason"] for w in commit["windows"]] == ["bypass"]


@BOTH_ENGINES
def test_a_read_that_never_catches_up_suppresses_timeouts_for_the_bound_only(
    transactional: bool,
) -> None:
    d, _ = _down_past_the_deadline(transactional)
    d.mono_ms = 1_000_000 + BOUND_MS - 1
    d.tick(at(10, 10, 44))
    assert d.processor.stats["timeouts"] == 0
    d.mono_ms = 1_000_000 + BOUND_MS
    d.tick(at(10, 10, 45))
    assert d.processor.stats["timeouts"] == 1 and len(d.bypassed()) == 1


@BOTH_ENGINES
def test_dispatch_goes_on_while_catching_up(transactional: bool) -> None:
    d, _ = _down_past_the_deadline(transactional)
    d.upsert("cluster-k", at(10, 10), max_in_flight=2)  # same partition, windows due at once
    d.tick(at(10, 10, 1))
    assert {t["stream_id"] for t in d.tasks()} == {"cluster-k"}
    assert len(d.tasks()) == 2 and d.processor.stats["timeouts"] == 0
