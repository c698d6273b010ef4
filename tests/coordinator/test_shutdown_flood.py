"""A worker that answers every task with `shutdown` cannot keep a window retried forever.

Issue 25, defect 11: a handler's own `Nack("shutdown")` was taken for a stopping worker, so its
window was requeued at once, attempt after attempt (361 in an hour), never bypassed despite
`max_attempts` 3 and `bypass_after_ms` 5 min. The worker runtime no longer lets a handler send
that kind (streams.worker.results), and the core frees only a window's first
SHUTDOWN_REQUEUES_MAX shutdown nacks (streams.core.lifecycle), for older workers and workers
written against the wire contract in other languages.
"""

from __future__ import annotations

import pytest

from streams.core.lifecycle import SHUTDOWN_REQUEUES_MAX

from .fakes import T0, Driver, at, nack

SID = "cluster-a"


@pytest.mark.parametrize("transactional", [False, True], ids=["faust", "confluent"])
def test_a_window_nacked_shutdown_on_every_attempt_is_bypassed_within_its_budget(
    transactional: bool,
) -> None:
    d = Driver(transactional=transactional)
    d.upsert(SID, at(10, 0, 30), max_attempts=3, bypass_after_ms=300_000)
    d.assign(SID)
    answered = 0
    now_ms = at(10, 0, 30)
    while now_ms < at(11, 0):  # an hour, a tick every 10 s, every task nacked "shutdown" at once
        d.tick(now_ms)
        tasks = d.tasks()
        for task in tasks[answered:]:
            d.result(nack(task, "shutdown"), now_ms)
        answered = len(tasks)
        if not transactional:
            d.emitter.deliver_all()
        now_ms += 10_000

    first = [t for t in d.tasks() if t["start_ms"] == T0]
    assert len(first) == SHUTDOWN_REQUEUES_MAX + 3  # 10 free, then max_attempts 3 failures
    bypassed = [w for c in d.commits() for w in c["windows"] if w["start_ms"] == T0]
    assert [(w["end_ms"], w["reason"], w["attempts"]) for w in bypassed] == [
        (at(10, 1), "bypass", SHUTDOWN_REQUEUES_MAX + 3)
    ]
    assert d.bypassed()[0].json()["last_error"]["kind"] == "shutdown"
    assert d.rejected() == []
