"""The coroutine handler's time limit (``max_task_s``), one timer for every call on the loop.

``asyncio.timeout`` around each call schedules a timer per call and cancels it when the call
returns: with 500 calls in flight and handlers that answer at once, about 8 µs of the worker's
CPU a task on one core (``bench/worker_bench.py --handler async --latency-ms 0 --worker-cpus
1``, 2026-12-05: 49-62 µs a result without it, 59-71 with it). Every call has the same limit,
so the calls' deadlines come in the order they started: a queue in that order, and one timer
for its head, do the same work. The timer is set no closer than ``GRANULARITY_S`` apart, so a
call is cancelled up to that much (or a tenth of the limit, if less) after its limit.

Everything here runs on the loop's thread.
"""

from __future__ import annotations

import asyncio
from collections import deque

GRANULARITY_S = 0.05


class Deadlines:
    """The calls running on one loop, by deadline (see the module's docstring)."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self._granularity_s = min(GRANULARITY_S, limit_s / 10)
        self._queue: deque[tuple[float, asyncio.Task[None]]] = deque()  # in start order
        self._running = 0  # calls started and not finished (the queue also holds finished ones)
        self._expired: set[asyncio.Task[None]] = set()  # cancelled by their deadline
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop of the timer

    def start(self, task: asyncio.Task[None]) -> None:
        """The current call's task starts; it is cancelled once past the limit."""
        loop = task.get_loop()
        if loop is not self._loop:  # a first call, or a new loop (the test kit's, after a close)
            self._loop, self._timer = loop, None
            self._queue.clear()
            self._running = 0
        deadline = loop.time() + self.limit_s
        self._queue.append((deadline, task))
        self._running += 1
        if len(self._queue) > 2 * self._running + 64:  # finished calls: drop them (amortized)
            self._queue = deque(entry for entry in self._queue if not entry[1].done())
        if self._timer is None:
            self._arm(loop, deadline)

    def finish(self, task: asyncio.Task[None]) -> None:
        """The call's task is about to end (it stays queued until the head or a sweep)."""
        self._running -= 1
        self._expired.discard(task)

    def expired(self, task: asyncio.Task[None]) -> bool:
        """Whether a cancellation of `task` is its deadline's (else: from outside)."""
        return task in self._expired

    def _arm(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        self._timer = loop.call_at(max(deadline, loop.time() + self._granularity_s),
                                   self._expire, loop)  # fmt: skip

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        now = loop.time()
        queue = self._queue
        while queue and (queue[0][0] <= now or queue[0][1].done()):
            _, task = queue.popleft()
            if not task.done():
                self._expired.add(task)
                task.cancel()
        if queue:
            self._arm(loop, queue[0][0])
