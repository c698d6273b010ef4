"""Blocking librdkafka calls made on a thread of their own, given up on when they never return."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from streams.kafka.txn_errors import CallStuck

# A blocking transactional call that has not returned this long after its deadline is stuck
# inside librdkafka, its own timeout ignored (a slice of 1 s was seen to return after 10 s, and
# one to hang for the whole of a broker outage): the engine gives up on it and renews.
STUCK_GRACE_S = 15.0
# The thread that makes those calls ends when idle this long (a new one starts on demand).
CALLER_IDLE_S = 1.0


class _Job:
    __slots__ = ("call", "done", "error", "result")

    def __init__(self, call: Callable[[], Any]) -> None:
        self.call = call
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class Caller:
    """Makes the producer's blocking transactional calls on a daemon thread of its own, so that
    one that never returns cannot hold the engine's loop: the loop waits until the call's
    deadline plus STUCK_GRACE_S, then raises CallStuck, and every later call does too. Two
    thread hand-offs per call (tens of microseconds) against a commit of milliseconds."""

    def __init__(self) -> None:
        self._jobs: deque[_Job] = deque()
        self._cv = threading.Condition()
        self._running = False
        self.stuck: str | None = None

    def call(self, call: Callable[[], Any], wait_s: float, what: str) -> Any:
        if self.stuck is not None:
            raise CallStuck(f"{what}: an earlier call is stuck ({self.stuck})")
        job = _Job(call)
        with self._cv:
            self._jobs.append(job)
            if not self._running:
                self._running = True
                threading.Thread(target=self._serve, name="txn-calls", daemon=True).start()
            self._cv.notify()
        if not job.done.wait(wait_s):
            self.stuck = what
            raise CallStuck(f"{what}: no return within {wait_s:.0f} s (stuck in librdkafka)")
        if job.error is not None:
            raise job.error
        return job.result

    def _serve(self) -> None:
        while True:
            with self._cv:
                while not self._jobs:
                    if not self._cv.wait(CALLER_IDLE_S) and not self._jobs:
                        self._running = False
                        return
                job = self._jobs.popleft()
            try:
                job.result = job.call()
            except BaseException as exc:  # handed to the waiting caller
                job.error = exc
            job.done.set()
