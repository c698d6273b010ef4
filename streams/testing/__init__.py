"""Tidemark's test kit: test a pipeline's handler without Kafka, sync or ``async``.

    from streams.testing import assert_ack, assert_nack, make_task, run_handler

    def test_my_handler_acks_the_window() -> None:
        task = make_task(params={"path": "/tmp/out.jsonl"})
        assert_ack(run_handler(MyPipeline(), task), ack_ms=task.end_ms)

- ``make_task``: a task as the coordinator dispatches it, every field defaulted (a one-minute
  window at 15 s steps ending at ``DEFAULT_END_MS``), any of them overridden.
- ``run_handler``: calls a handler, sync or ``async``, as the worker does, and returns the
  outcome the worker would send: an exception or a bad answer becomes a ``handler_error``
  nack, a coroutine running past ``timeout_s`` is cancelled and nacked ``timeout``.
  ``HandlerRunner`` does the same task after task on one event loop, for an ``async`` handler
  that keeps a session between tasks, and closes it (``aclose``) at the end.
- ``assert_ack`` and ``assert_nack``: check an outcome, with a message that says what came.
- ``InProcessWorker``: the real worker runtime over in-memory fakes of Kafka
  (``InMemoryTaskSource``, ``InMemoryResultSink``) and an executor whose calls run when the test
  says (``HeldExecutor``), at clocks the test sets: commits, heartbeats, shutdown, rebalances.

Nothing here is imported by the worker or the coordinator (tests/test_import_boundaries.py).
"""

from __future__ import annotations

from streams.testing.fakes import (
    CallRunner,
    HeldExecutor,
    InMemoryResultSink,
    InMemoryTaskSource,
    Sent,
)
from streams.testing.tasks import (
    DEFAULT_END_MS,
    HandlerRunner,
    assert_ack,
    assert_nack,
    make_task,
    run_handler,
)
from streams.testing.worker import TASKS, InProcessWorker

__all__ = [
    "DEFAULT_END_MS",
    "TASKS",
    "CallRunner",
    "HandlerRunner",
    "HeldExecutor",
    "InMemoryResultSink",
    "InMemoryTaskSource",
    "InProcessWorker",
    "Sent",
    "assert_ack",
    "assert_nack",
    "make_task",
    "run_handler",
]
