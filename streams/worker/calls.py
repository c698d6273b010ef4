"""Handler calls: a sync handler on threads, a coroutine handler on an asyncio loop.

The kind is decided once, when the runtime is built (``streams.handler.handler_kind``), not at
the first task: an ``async def`` handler run on a thread would only return a coroutine, and
every task would fail. Either way a call never raises, and its outcome (checked by
``streams.worker.results``) goes back to the runtime's loop thread through one queue, which is
all the runtime sees: heartbeats, shutdown nacks and commits are the same for both kinds.

Only a coroutine can be stopped from outside: one that runs longer than ``max_task_s`` is
cancelled (its ``finally`` blocks run; ``streams.worker.deadlines``) and answered with a
``timeout`` nack; a ``TimeoutError`` the handler raises itself is an error like any other. A
thread cannot be; it only loses its heartbeats then (``streams.worker.jobs``).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import queue
import time
from typing import cast

from streams.handler import (
    HANDLER_ERROR,
    SHUTDOWN,
    TIMEOUT,
    AnyHandler,
    AsyncHandler,
    Handler,
    Nack,
    Outcome,
)
from streams.handler import handler_kind as kind_of
from streams.params import with_typed_params
from streams.worker.aio import LoopExecutor
from streams.worker.deadlines import Deadlines
from streams.worker.jobs import Job
from streams.worker.pool import HandlerPool
from streams.worker.ports import CoroutineExecutor, HandlerExecutor
from streams.worker.results import checked_outcome, error_outcome

log = logging.getLogger("streams.worker")

Returned = tuple[Job, Outcome, float]  # the job, its outcome, how long the call took (s)


class HandlerCalls:
    """Runs ``handler`` for each job on the executor of its kind; outcomes go to ``outcomes``.

    ``executor`` runs a sync handler (default: a ``HandlerPool`` of ``concurrency`` threads),
    ``coroutine_executor`` a coroutine handler (default: a ``LoopExecutor``).
    """

    def __init__(
        self,
        handler: AnyHandler,
        outcomes: queue.SimpleQueue[Returned],
        *,
        concurrency: int,
        max_task_s: float,
        executor: HandlerExecutor | None = None,
        coroutine_executor: CoroutineExecutor | None = None,
    ) -> None:
        handler = with_typed_params(handler)  # a params model: decoded here, once per task
        self.kind = kind_of(handler)
        self._outcomes = outcomes
        self._max_task_s = max_task_s
        self._deadlines = Deadlines(max_task_s)  # a coroutine handler's, on its loop
        self._threads: HandlerExecutor | None = None
        self._loop: CoroutineExecutor | None = None
        if self.kind == "coroutine":
            self._async_handler = cast(AsyncHandler, handler)
            self._loop = LoopExecutor() if coroutine_executor is None else coroutine_executor
        else:
            self._handler = cast(Handler, handler)
            self._threads = HandlerPool(concurrency) if executor is None else executor

    def start(self) -> None:
        (self._loop or self._threads_or_fail()).start()

    def submit(self, job: Job) -> None:
        """Start the handler on ``job``'s task; its outcome comes back through the queue."""
        job.started_s = time.monotonic()
        if self._loop is not None:
            self._loop.submit(functools.partial(self._call_coroutine, job))
        else:
            self._threads_or_fail().submit(functools.partial(self._call, job))

    def close(self, timeout_s: float) -> bool:
        """Stop the executor. A coroutine handler's ``aclose()`` (its HTTP session, say) runs
        last, on the loop, since what it closes belongs to that loop."""
        if self._loop is not None:
            aclose = getattr(self._async_handler, "aclose", None)
            return self._loop.close(timeout_s, aclose if callable(aclose) else None)
        return self._threads_or_fail().close(timeout_s)

    def _threads_or_fail(self) -> HandlerExecutor:
        assert self._threads is not None
        return self._threads

    def _call(self, job: Job) -> None:
        """On a pool thread: run the handler, never raise, hand the outcome to the loop."""
        outcome: Outcome
        try:
            answer = self._handler(job.task)
            if inspect.isawaitable(answer):
                outcome = _undeclared_coroutine(answer)
            else:
                outcome = checked_outcome(job.task, answer)
        except BaseException as exc:  # a handler error must never kill the worker
            log.warning("task %s: the handler raised", job.task.task_id, exc_info=True)
            outcome = error_outcome(exc)
        self._outcomes.put((job, outcome, time.monotonic() - job.started_s))

    async def _call_coroutine(self, job: Job) -> None:
        """On the loop: await the handler, at most ``max_task_s``; never raise but on a
        cancellation from outside (the executor's close), after handing over a shutdown nack."""
        outcome: Outcome
        task = cast("asyncio.Task[None]", asyncio.current_task())
        deadlines = self._deadlines
        deadlines.start(task)
        try:
            answer = await self._async_handler(job.task)
            outcome = checked_outcome(job.task, answer)
        except asyncio.CancelledError:
            if not deadlines.expired(task) or task.uncancel() > 0:
                # the worker is closing: its answer is shutdown already
                self._put(job, Nack(SHUTDOWN, "the worker stopped; the call was cancelled"))
                raise
            message = f"the handler ran longer than {self._max_task_s:g} s; cancelled"
            log.warning("task %s: %s", job.task.task_id, message)
            outcome = Nack(TIMEOUT, message)
        except BaseException as exc:  # a handler error must never kill the worker
            log.warning("task %s: the handler raised", job.task.task_id, exc_info=True)
            outcome = error_outcome(exc)
        finally:
            deadlines.finish(task)
        self._put(job, outcome)

    def _put(self, job: Job, outcome: Outcome) -> None:
        self._outcomes.put((job, outcome, time.monotonic() - job.started_s))


def _undeclared_coroutine(answer: object) -> Nack:
    """A sync handler that returned an awaitable: say how to declare it (and close a coroutine,
    which would otherwise warn that it was never awaited)."""
    if inspect.iscoroutine(answer):
        answer.close()
    return Nack(
        HANDLER_ERROR,
        f"the handler returned {type(answer).__name__}, not Ack or Nack: declare it "
        "`async def` (or its __call__) so that the worker runs it on its event loop",
    )
