"""The handler API: a task window goes in, an ack or a nack comes out.

Pipelines and the worker runtime both depend on this module, and it depends on neither
(``streams.worker.api`` re-exports it for handlers written against that name).

A handler is any callable ``(Task) -> Ack | Nack``, or a coroutine function ``async (Task) -> Ack |
Nack`` (an ``async def`` function, or an object whose ``__call__`` is one): ``handler_kind`` tells
them apart when the worker starts, and the worker runs the first kind on threads, the second on
an asyncio loop. It must not raise for an expected
failure (a source down, no data, a failed export): it answers with a ``Nack`` whose
``kind`` the coordinator can act on (retry, or bypass at once for non-retryable kinds).
The runtime turns anything a handler raises into a ``handler_error`` nack, and so a nack of a
kind Tidemark reserves for itself (``RESERVED_KINDS``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from streams.core.lifecycle import SHUTDOWN_KIND, TIMEOUT_KIND
from streams.core.model import NACK_WITHOUT_ERROR
from streams.core.model import Task as Task  # one task type: what the coordinator sends

# Nack kinds used across Tidemark, in one place so that stream configs
# (`non_retryable`) and dashboards can rely on the spelling.
BAD_PARAMS: Final = "bad_params"  # the task's params cannot be used; retrying will not help
CORE_METRIC: Final = "core_metric"  # a core source query failed
NO_DATA: Final = "no_data"  # the window holds no data point
EXPORT: Final = "export"  # the downstream export failed or timed out
OUTAGE: Final = "outage"  # the synthetic pipeline's outage switch is on
SYNTHETIC_FAILURE: Final = "synthetic_failure"  # the synthetic pipeline's drawn failure
HANDLER_ERROR: Final = "handler_error"  # the handler raised or answered badly (set by the runtime)
# The worker stopped before the task finished (set by the runtime); the core requeues it at once.
SHUTDOWN: Final = SHUTDOWN_KIND
# A coroutine handler ran longer than the worker's --max-task-s and was cancelled (set by the
# runtime); the coordinator counts it as it counts a deadline that passed.
TIMEOUT: Final = TIMEOUT_KIND
# Kinds that only Tidemark sets, never a handler: the runtime's two above, the coordinator's
# `timeout` (no result by the deadline) and `unknown` (a nack without an error). A handler's
# nack of one of them is sent as a `handler_error` saying so (streams.worker.results): a
# handler's `shutdown` would be requeued at once without spending the retry budget, forever.
RESERVED_KINDS: Final = frozenset({HANDLER_ERROR, SHUTDOWN, TIMEOUT_KIND, NACK_WITHOUT_ERROR.kind})


@dataclass(frozen=True)
class Ack:
    """The window is done up to ``ack_ms``: the last data point found and delivered.

    ``ack_ms < end_ms`` is a partial ack; the coordinator requires ``start_ms < ack_ms <= end_ms``.
    """

    ack_ms: int


@dataclass(frozen=True)
class Nack:
    """The attempt failed: ``kind`` is a short machine-readable reason, ``message`` for people."""

    kind: str
    message: str


Outcome = Ack | Nack


class Handler(Protocol):
    """Does the work for one task. Called from worker threads, possibly concurrently."""

    def __call__(self, task: Task) -> Outcome: ...


class AsyncHandler(Protocol):
    """Does the work for one task as a coroutine, on the worker's one asyncio loop, with many
    tasks in flight at once: it must not block the loop (no ``time.sleep``, no blocking I/O)."""

    def __call__(self, task: Task) -> Awaitable[Outcome]: ...


AnyHandler = Handler | AsyncHandler
HandlerKind = Literal["thread", "coroutine"]


def handler_kind(handler: object) -> HandlerKind:
    """``"coroutine"`` for an ``async def`` function, a partial of one, or an object whose
    ``__call__`` is one; ``"thread"`` for any other callable.

    Decided from the handler itself, before any task: a handler that only returns a coroutine
    (a lambda around an ``async def``, say) cannot be told apart, and the runtime answers its
    tasks with a ``handler_error`` that says to declare it ``async def``.
    """
    target = handler
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.iscoroutinefunction(target):
        return "coroutine"
    call = getattr(target, "__call__", None)  # noqa: B004 (the bound method, not callable())
    return "coroutine" if call is not None and inspect.iscoroutinefunction(call) else "thread"
