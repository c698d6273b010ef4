"""The coroutine executor: one event loop on one thread, hundreds of calls in flight, and a
close that cancels what still runs. Real time, a few hundred milliseconds in all."""

from __future__ import annotations

import asyncio
import threading
import time

from streams.handler import Ack, Outcome, Task
from streams.testing import TASKS
from streams.testing import InProcessWorker as Worker
from streams.worker.aio import LoopExecutor
from tests.worker.kafka_helpers import make_task, wait_until

CALLS = 300


def test_hundreds_of_calls_wait_at_once_on_one_thread() -> None:
    executor = LoopExecutor()
    executor.start()
    threads: set[int] = set()
    done: list[int] = []

    def call(n: int) -> object:
        async def run() -> None:
            threads.add(threading.get_ident())
            await asyncio.sleep(0.2)
            done.append(n)

        return run

    began = time.monotonic()
    try:
        for n in range(CALLS):
            executor.submit(call(n))  # type: ignore[arg-type]
        wait_until(lambda: len(done) == CALLS, 5, "every call")
        elapsed_s = time.monotonic() - began
    finally:
        assert executor.close(1.0)
    assert sorted(done) == list(range(CALLS))
    assert len(threads) == 1 and threading.get_ident() not in threads
    assert elapsed_s < 1.5  # 300 calls of 200 ms each, overlapped: not 60 s one after another


def test_close_cancels_running_calls_and_lets_them_clean_up() -> None:
    executor = LoopExecutor()
    executor.start()
    entered = threading.Event()
    cleaned = threading.Event()

    async def stuck() -> None:
        try:
            entered.set()
            await asyncio.sleep(60)
        finally:
            cleaned.set()

    executor.submit(stuck)
    assert entered.wait(2)
    began = time.monotonic()
    assert executor.close(1.0)
    assert cleaned.is_set() and time.monotonic() - began < 1.0
    assert not any(t.name == "tidemark-async" for t in threading.enumerate())


def test_a_call_that_blocks_the_loop_is_left_behind_at_close() -> None:
    executor = LoopExecutor()
    executor.start()
    release = threading.Event()

    async def blocking() -> None:
        release.wait(5)  # a sync wait inside a coroutine: the loop cannot cancel it

    executor.submit(blocking)
    try:
        assert not executor.close(0.1)
    finally:
        release.set()


def test_a_closed_executor_that_never_started_leaves_nothing() -> None:
    assert LoopExecutor().close(0.1)


def test_a_runtime_on_the_real_loop_keeps_hundreds_of_tasks_in_flight() -> None:
    """The runtime, the real loop executor and the in-memory source and sink: 200 tasks of
    a 300 ms handler, all in flight at once, acked and committed in well under 200 x 300 ms."""
    in_flight = peak = 0

    async def slow(task: Task) -> Outcome:
        nonlocal in_flight, peak
        in_flight += 1  # one loop thread: no lock needed
        peak = max(peak, in_flight)
        await asyncio.sleep(0.3)
        in_flight -= 1
        return Ack(task.end_ms)

    executor = LoopExecutor()  # the real one, not the held fake
    worker = Worker(slow, int(time.time() * 1000), concurrency=200, executor=executor)
    worker.source.assign((TASKS, 0))
    for n in range(200):
        worker.source.add_task(make_task("s", n, now_ms=worker.now_ms))
    began = time.monotonic()
    try:
        while len(worker.sink.values("ack")) < 200 and time.monotonic() - began < 10:
            worker.runtime.turn()
            worker.sink.confirm()
        worker.turns()
    finally:
        assert executor.close(1.0)
    assert len(worker.sink.values("ack")) == 200
    assert peak >= 150  # the board let them all run, the loop ran them at once
    assert worker.source.committed == {(TASKS, 0): 200}
    assert time.monotonic() - began < 5


def test_a_stopping_worker_closes_an_async_handler_on_its_loop_after_its_calls() -> None:
    """A coroutine handler's resources (an aiohttp session) belong to the loop they were made
    on: ``aclose`` runs there, once the calls still running are cancelled (none uses them)."""
    events: list[tuple[str, int]] = []

    class WithSession:
        async def __call__(self, task: Task) -> Outcome:
            if task.params.get("hang"):
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    events.append(("cancelled", threading.get_ident()))
                    raise
            events.append(("called", threading.get_ident()))
            return Ack(task.end_ms)

        async def aclose(self) -> None:
            await asyncio.sleep(0)
            events.append(("closed", threading.get_ident()))

    worker = Worker(WithSession(), int(time.time() * 1000), executor=LoopExecutor())
    worker.source.assign((TASKS, 0))
    worker.source.add_task(make_task("s", 0, now_ms=worker.now_ms))
    worker.source.add_task(make_task("s", 1, now_ms=worker.now_ms, params={"hang": True}))
    began = time.monotonic()
    while not worker.sink.values("ack") and time.monotonic() - began < 5:
        worker.runtime.turn()
    worker.stop()

    assert [name for name, _ in events] == ["called", "cancelled", "closed"]
    assert len({thread for _, thread in events}) == 1  # all on the loop's thread
    assert [v["error"]["kind"] for v in worker.sink.values("nack")] == ["shutdown"]


def test_calls_submitted_while_the_loop_is_busy_share_one_wake_up() -> None:
    """A wake-up per call writes to the loop's self-pipe each time: with hundreds of calls in
    flight that took a fifth of the worker's loop thread. Calls that find a wake-up on its way
    go with it, and none is lost."""
    executor = LoopExecutor()
    executor.start()
    busy, release = threading.Event(), threading.Event()
    done: list[int] = []

    async def block() -> None:
        busy.set()
        release.wait(5)  # holds the loop, as a burst of work on it would

    def call(n: int) -> object:
        async def run() -> None:
            done.append(n)

        return run

    try:
        executor.submit(block)
        assert busy.wait(5)
        loop = executor._loop
        assert loop is not None
        wake_ups = 0
        real = loop.call_soon_threadsafe

        def counted(*args: object) -> object:
            nonlocal wake_ups
            wake_ups += 1
            return real(*args)  # type: ignore[arg-type]

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        for n in range(CALLS):
            executor.submit(call(n))  # type: ignore[arg-type]
        release.set()
        wait_until(lambda: len(done) == CALLS, 5, "every call")
        for n in range(CALLS, CALLS + 3):  # after the burst: each wakes the idle loop again
            executor.submit(call(n))  # type: ignore[arg-type]
            wait_until(lambda n=n: len(done) == n + 1, 5, "the call")  # type: ignore[misc]
        del loop.call_soon_threadsafe  # the close's own calls are not counted
    finally:
        assert executor.close(1.0)
    assert sorted(done) == list(range(CALLS + 3))
    assert wake_ups == 1 + 3, f"{wake_ups} wake-ups for {CALLS + 3} calls"
