"""A task factory, a handler runner and assertions, for a pipeline's unit tests."""

from __future__ import annotations

import queue
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from streams.core.model import task_id
from streams.handler import Ack, AnyHandler, Nack, Outcome, Task
from streams.testing.fakes import CallRunner
from streams.worker.calls import HandlerCalls, Returned
from streams.worker.jobs import Job
from streams.worker.offsets import OffsetToken

# When ``make_task``'s window ends by default: 2027-01-15T08:00:00Z, a whole minute.
DEFAULT_END_MS: Final = 1_800_000_000_000


def make_task(
    stream_id: str = "stream",
    *,
    params: Mapping[str, Any] | None = None,
    end_ms: int = DEFAULT_END_MS,
    start_ms: int | None = None,
    window_ms: int = 60_000,
    step_ms: int = 15_000,
    attempt: int = 1,
    dispatched_ms: int | None = None,
    timeout_ms: int = 30_000,
    replay: bool = False,
    incarnation: int | None = None,
) -> Task:
    """A task as the coordinator dispatches it: the window ``(start_ms, end_ms]`` (by default
    the minute before ``end_ms``), dispatched at ``end_ms`` unless said, due ``timeout_ms``
    later, its params read-only and its ``task_id`` made as the coordinator makes it."""
    start = end_ms - window_ms if start_ms is None else start_ms
    dispatched = end_ms if dispatched_ms is None else dispatched_ms
    return Task(
        task_id=task_id(stream_id, start, attempt),
        stream_id=stream_id,
        start_ms=start,
        end_ms=end_ms,
        step_ms=step_ms,
        attempt=attempt,
        dispatched_ms=dispatched,
        deadline_ms=dispatched + timeout_ms,
        params=MappingProxyType(dict(params or {})),
        replay=replay,
        incarnation=incarnation,
    )


class _RunAtOnce:
    """An executor that runs each call at once, in the caller's thread, coroutines on one
    loop (``CallRunner``)."""

    def __init__(self) -> None:
        self.run = CallRunner()

    def start(self) -> None:
        pass

    def submit(self, call: Any) -> None:
        self.run(call)

    def close(self, timeout_s: float, last: Any = None) -> bool:
        if last is not None:
            self.run(last)
        self.run.close()
        return True


class HandlerRunner:
    """Calls one handler, sync or ``async``, task after task, as the worker calls it: on one
    event loop for an ``async`` handler, so that what it keeps between tasks (an HTTP session)
    stays usable. ``close()`` ends it, with the handler's ``aclose()`` if it has one.

        with HandlerRunner(AsyncMetricsPipeline()) as run:
            assert_ack(run(task))

    Each call returns the outcome the worker would send (see ``run_handler``).
    """

    def __init__(self, handler: AnyHandler, *, timeout_s: float = 60.0) -> None:
        self._outcomes: queue.SimpleQueue[Returned] = queue.SimpleQueue()
        self._executor = _RunAtOnce()
        self._calls = HandlerCalls(
            handler,
            self._outcomes,
            concurrency=1,
            max_task_s=timeout_s,
            executor=self._executor,
            coroutine_executor=self._executor,
        )

    def __call__(self, task: Task | None = None) -> Outcome:
        task = make_task() if task is None else task
        self._calls.submit(Job(task, OffsetToken(("tasks", 0), 0, 0)))
        return self._outcomes.get_nowait()[1]

    def close(self, *, handler_too: bool = True) -> None:
        """Close the loop, after the handler's ``aclose()`` (unless not ``handler_too``)."""
        if handler_too:
            self._calls.close(timeout_s=10.0)
        else:
            self._executor.run.close()

    def __enter__(self) -> HandlerRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_handler(
    handler: AnyHandler, task: Task | None = None, *, timeout_s: float = 60.0
) -> Outcome:
    """Call ``handler`` (sync or ``async``) on ``task`` (default: ``make_task()``) exactly as
    the worker calls it, and return the outcome the worker would send.

    The worker's own code makes the call (``streams.worker.calls``): an exception, an ack
    outside the window or a reserved nack kind come back as a ``handler_error`` nack (the
    exception is logged with its traceback), and a coroutine still running after
    ``timeout_s`` is cancelled and comes back as a ``timeout`` nack. A sync handler cannot be
    cancelled: it runs to its end. One call on a loop of its own: for an ``async`` handler that
    keeps a session between tasks, call it through one ``HandlerRunner`` instead.
    """
    runner = HandlerRunner(handler, timeout_s=timeout_s)
    try:
        return runner(task)
    finally:
        runner.close(handler_too=False)  # the handler stays open: it is the caller's


def assert_ack(outcome: Outcome, ack_ms: int | None = None) -> Ack:
    """``outcome`` is an ack (up to ``ack_ms``, if given); returns it."""
    if not isinstance(outcome, Ack):
        raise AssertionError(f"expected an ack, got {_shown(outcome)}")
    if ack_ms is not None and outcome.ack_ms != ack_ms:
        raise AssertionError(f"expected an ack up to {ack_ms}, got one up to {outcome.ack_ms}")
    return outcome


def assert_nack(outcome: Outcome, kind: str | None = None, message: str | None = None) -> Nack:
    """``outcome`` is a nack (of ``kind``, with ``message`` in its text, if given)."""
    if not isinstance(outcome, Nack):
        raise AssertionError(f"expected a nack, got {_shown(outcome)}")
    if kind is not None and outcome.kind != kind:
        raise AssertionError(f"expected a nack {kind!r}, got {_shown(outcome)}")
    if message is not None and message not in outcome.message:
        raise AssertionError(f"expected a nack saying {message!r}, got {_shown(outcome)}")
    return outcome


def _shown(outcome: object) -> str:
    if isinstance(outcome, Nack):
        return f"a nack {outcome.kind!r}: {outcome.message}"
    if isinstance(outcome, Ack):
        return f"an ack up to {outcome.ack_ms}"
    return repr(outcome)
