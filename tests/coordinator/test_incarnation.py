"""A slow worker's ack across a delete and re-create does not commit the new stream's window."""

from __future__ import annotations

import pytest

from tests.coordinator.fakes import Driver, ack, at, nack


@pytest.mark.parametrize("transactional", [False, True])
def test_an_ack_of_the_deleted_stream_is_rejected_naming_the_incarnation(
    transactional: bool,
) -> None:
    driver = Driver(transactional=transactional)
    driver.assign("s")
    driver.upsert("s", at(10, 1), max_attempts=1, non_retryable=["core_metric"])
    (old_task,) = driver.tasks()
    driver.control({"type": "delete", "stream_id": "s"}, at(10, 1, 5))
    driver.upsert("s", at(10, 1, 10), window_ms=60_000, max_attempts=1)
    new_task = driver.tasks()[-1]
    assert (new_task["start_ms"], new_task["attempt"]) == (old_task["start_ms"], 1)
    assert new_task["incarnation"] != old_task["incarnation"]

    driver.result(ack(old_task, incarnation=old_task["incarnation"]), at(10, 1, 20))
    driver.result(nack(old_task, "core_metric", incarnation=old_task["incarnation"]), at(10, 1, 21))
    driver.tick(at(10, 1, 30))
    assert driver.commits() == [] and driver.bypassed() == []
    reasons = [r["reason"] for r in driver.rejected()]
    assert len(reasons) == 2 and all(r.startswith("incarnation ") for r in reasons), reasons

    # The new incarnation's own ack counts, with its incarnation or (a worker before them) without.
    driver.result(ack(new_task, incarnation=new_task["incarnation"]), at(10, 1, 40))
    driver.tick(at(10, 2))
    (commit,) = driver.commits()
    assert commit["downstream_ms"] == at(10, 1)
    second = driver.tasks()[-1]
    driver.result(ack(second), at(10, 2, 10))
    driver.tick(at(10, 3))
    assert driver.commits()[-1]["downstream_ms"] == at(10, 2)
