"""streams.worker.deadlines: one timer for every coroutine call's time limit."""

from __future__ import annotations

import asyncio

from streams.worker.deadlines import Deadlines


async def _call(deadlines: Deadlines, seconds: float, ended: list[str], name: str) -> None:
    task = asyncio.current_task()
    assert task is not None
    deadlines.start(task)
    try:
        await asyncio.sleep(seconds)
        ended.append(f"{name} done")
    except asyncio.CancelledError:
        ended.append(f"{name} {'expired' if deadlines.expired(task) else 'cancelled'}")
        raise
    finally:
        deadlines.finish(task)


def test_only_calls_past_the_limit_are_cancelled_and_told_from_a_cancel_from_outside() -> None:
    async def main() -> list[str]:
        deadlines = Deadlines(0.2)
        ended: list[str] = []
        slow = asyncio.create_task(_call(deadlines, 5, ended, "slow"))
        quick = asyncio.create_task(_call(deadlines, 0.01, ended, "quick"))
        stopped = asyncio.create_task(_call(deadlines, 5, ended, "stopped"))
        await asyncio.sleep(0.05)
        stopped.cancel()  # the executor's close: not a deadline
        await asyncio.gather(slow, quick, stopped, return_exceptions=True)
        return ended

    assert asyncio.run(main()) == ["quick done", "stopped cancelled", "slow expired"]


def test_a_call_is_cancelled_within_the_granularity_of_its_limit() -> None:
    async def main() -> float:
        deadlines = Deadlines(0.3)
        loop = asyncio.get_running_loop()
        started = loop.time()
        task = asyncio.create_task(_call(deadlines, 5, [], "slow"))
        await asyncio.gather(task, return_exceptions=True)
        return loop.time() - started

    took_s = asyncio.run(main())
    assert 0.3 <= took_s < 0.3 + 0.03 + 0.2  # the limit, a tenth of it, a loaded machine


def test_finished_calls_do_not_pile_up_under_a_long_limit() -> None:
    async def main() -> int:
        deadlines = Deadlines(600)
        for _ in range(5_000):  # one after the other: one running at a time
            await asyncio.create_task(_call(deadlines, 0, [], "quick"))
        return len(deadlines._queue)

    assert asyncio.run(main()) <= 2 * 1 + 64 + 1


def test_a_second_loop_gets_its_own_timer() -> None:
    """The test kit makes a new loop after a closed one: the calls on it still expire, though
    the first loop closed with its timer still set (its call ended before its limit)."""
    deadlines = Deadlines(0.1)
    ended: list[str] = []

    async def one(name: str, seconds: float) -> None:
        task = asyncio.create_task(_call(deadlines, seconds, ended, name))
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(one("first", 0))
    asyncio.run(one("second", 5))  # a new loop: the first loop's timer is gone with it
    assert ended == ["first done", "second expired"]
