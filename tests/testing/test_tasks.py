"""The test kit's task factory, handler runner and assertions (streams/testing/tasks.py)."""

from __future__ import annotations

import asyncio
from types import MappingProxyType

import pytest

from streams.handler import HANDLER_ERROR, SHUTDOWN, TIMEOUT, Ack, Nack, Outcome, Task
from streams.testing import (
    DEFAULT_END_MS,
    HandlerRunner,
    assert_ack,
    assert_nack,
    make_task,
    run_handler,
)
from streams.wire import decode_task, encode_task


def ack_end(task: Task) -> Outcome:
    return Ack(task.end_ms)


async def ack_end_async(task: Task) -> Outcome:
    await asyncio.sleep(0)
    return Ack(task.end_ms)


def test_a_task_has_sensible_defaults_and_survives_the_wire() -> None:
    task = make_task()
    assert (task.stream_id, task.end_ms - task.start_ms, task.step_ms) == ("stream", 60_000, 15_000)
    assert task.end_ms == DEFAULT_END_MS and task.end_ms % 60_000 == 0
    assert task.task_id == f"stream/{task.start_ms}/1"  # as the coordinator names it
    assert (task.dispatched_ms, task.deadline_ms) == (task.end_ms, task.end_ms + 30_000)
    assert isinstance(task.params, MappingProxyType)  # read-only, as decoded from `tasks`
    assert decode_task(encode_task(task)) == task


def test_any_field_can_be_set() -> None:
    task = make_task("s", params={"a": 1}, end_ms=120_000, window_ms=30_000, attempt=3)
    assert (task.start_ms, task.end_ms, task.attempt, dict(task.params)) == (
        90_000,
        120_000,
        3,
        {"a": 1},
    )
    assert task.task_id == "s/90000/3"
    assert make_task(start_ms=0, end_ms=10).start_ms == 0


@pytest.mark.parametrize("handler", [ack_end, ack_end_async], ids=["sync", "async"])
def test_the_runner_calls_either_kind_of_handler(handler: object) -> None:
    task = make_task()
    assert run_handler(handler, task) == Ack(task.end_ms)  # type: ignore[arg-type]


def test_the_runner_answers_as_the_worker_would() -> None:
    def raises(task: Task) -> Outcome:
        raise RuntimeError("boom")

    async def reserved(task: Task) -> Outcome:
        return Nack(SHUTDOWN, "not mine to say")

    assert_nack(run_handler(raises), HANDLER_ERROR, "RuntimeError: boom")
    assert_nack(run_handler(lambda t: Ack(t.start_ms)), HANDLER_ERROR, "outside the window")
    assert_nack(run_handler(reserved), HANDLER_ERROR, "reserved nack kind 'shutdown'")


def test_the_runner_cancels_a_coroutine_past_its_timeout() -> None:
    cancelled: list[bool] = []

    async def hangs(task: Task) -> Outcome:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return Ack(task.end_ms)

    assert_nack(run_handler(hangs, timeout_s=0.02), TIMEOUT, "longer than 0.02 s")
    assert cancelled == [True]


def test_the_assertions_say_what_came() -> None:
    task = make_task()
    assert assert_ack(Ack(task.end_ms), ack_ms=task.end_ms) == Ack(task.end_ms)
    with pytest.raises(AssertionError, match="expected an ack, got a nack 'no_data': empty"):
        assert_ack(Nack("no_data", "empty"))
    with pytest.raises(AssertionError, match="expected an ack up to 2, got one up to 1"):
        assert_ack(Ack(1), ack_ms=2)
    with pytest.raises(AssertionError, match="expected a nack, got an ack up to 1"):
        assert_nack(Ack(1))
    with pytest.raises(AssertionError, match="expected a nack 'export', got a nack 'no_data'"):
        assert_nack(Nack("no_data", "empty"), "export")
    with pytest.raises(AssertionError, match="saying 'timeout'"):
        assert_nack(Nack("export", "refused"), message="timeout")
    assert assert_nack(Nack("export", "refused"), "export", "ref") == Nack("export", "refused")


def test_a_runner_keeps_one_loop_for_every_call_and_closes_the_handler() -> None:
    class WithSession:
        """Like an aiohttp session: usable only on the loop it was made on."""

        def __init__(self) -> None:
            self.loop: asyncio.AbstractEventLoop | None = None
            self.closed = False

        async def __call__(self, task: Task) -> Outcome:
            running = asyncio.get_running_loop()
            self.loop = self.loop or running
            if self.loop is not running:
                return Nack("export", "the session belongs to another loop")
            return Ack(task.end_ms)

        async def aclose(self) -> None:
            self.closed = True

    handler = WithSession()
    with HandlerRunner(handler) as run:
        assert_ack(run(make_task(end_ms=60_000)))
        assert_ack(run(make_task(end_ms=120_000)))
        assert not handler.closed
    assert handler.closed
