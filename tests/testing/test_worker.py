"""The test kit's in-process worker (streams/testing/worker.py), with either kind of handler."""

from __future__ import annotations

import asyncio

import pytest

from streams.handler import SHUTDOWN, Ack, Outcome, Task
from streams.testing import TASKS, InProcessWorker, make_task


def ack_end(task: Task) -> Outcome:
    return Ack(task.end_ms)


async def ack_end_async(task: Task) -> Outcome:
    await asyncio.sleep(0)
    return Ack(task.end_ms)


@pytest.mark.parametrize("handler", [ack_end, ack_end_async], ids=["sync", "async"])
def test_a_given_task_is_worked_answered_and_committed(handler: object) -> None:
    worker = InProcessWorker(handler)  # type: ignore[arg-type]
    task = make_task()
    (offset,) = worker.give(task)
    assert worker.results() == []  # the call waits for work()
    worker.work()

    (ack,) = worker.results("ack")
    assert (ack["stream_id"], ack["ack_ms"]) == (task.stream_id, task.end_ms)
    assert worker.committed == {(TASKS, 0): offset + 1}
    assert worker.count("ack") == 1


def test_a_stop_nacks_the_running_task_shutdown() -> None:
    worker = InProcessWorker(ack_end)
    worker.give(make_task())
    worker.stop()

    (nack,) = worker.results("nack")
    assert nack["error"]["kind"] == SHUTDOWN
    assert worker.source.closed and worker.committed == {(TASKS, 0): 1}


def test_a_task_not_yet_ended_waits_for_the_clock() -> None:
    worker = InProcessWorker(ack_end)
    worker.give(make_task(end_ms=worker.now_ms + 5_000, dispatched_ms=worker.now_ms))
    worker.work()
    assert worker.results() == []
    worker.now_ms += 5_000
    worker.work()
    assert len(worker.results("ack")) == 1
