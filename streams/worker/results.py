"""The worker's answers: a handler's outcome checked and made a ``results`` value.

Pure functions, so the runtime's adapter code only moves bytes; the bytes come from
``streams.wire`` (``decode_task`` for tasks, ``encode_result`` and ``stream_key`` for results).
A result echoes the task's ``stream_id``, ``start_ms``, ``end_ms``, ``attempt`` and ``incarnation``
(when the task has one), which is how the coordinator finds the attempt it answers, and says the
pipeline the worker serves (left out for the default one, as a worker older than pipelines does),
which the coordinator checks against the stream's. Besides, ``heartbeat_report``: what a
heartbeat's delivery report does (log a failure, nothing else).
"""

from __future__ import annotations

import logging
from typing import Final

from streams.core import ErrorInfo, Result
from streams.core.config import DEFAULT_PIPELINE
from streams.core.model import ResultOutcome
from streams.handler import HANDLER_ERROR, RESERVED_KINDS, Ack, Nack, Outcome, Task
from streams.kafka.member import Delivered
from streams.wire import encode_result

log = logging.getLogger("streams.worker")

MAX_MESSAGE_CHARS: Final = 1000


def checked_outcome(task: Task, outcome: object) -> Outcome:
    """The handler's answer if the coordinator can accept it and it uses no reserved kind (see
    ``streams.handler.RESERVED_KINDS``), else a ``handler_error`` nack that says why.

    Catching a bad answer here gives a nack that names the bug at once, where the coordinator
    would reject the result and the window would wait for its deadline.
    """
    if isinstance(outcome, Ack):
        if isinstance(outcome.ack_ms, int) and task.start_ms < outcome.ack_ms <= task.end_ms:
            return outcome
        return Nack(
            HANDLER_ERROR,
            f"ack_ms {outcome.ack_ms!r} is outside the window ({task.start_ms}, {task.end_ms}]",
        )
    if isinstance(outcome, Nack):
        kind = outcome.kind
        if isinstance(kind, str) and kind:
            if kind in RESERVED_KINDS:
                return Nack(
                    HANDLER_ERROR,
                    bounded(
                        f"the handler returned the reserved nack kind {kind!r}, which only "
                        f"Tidemark sets; use a kind of your own: {outcome.message}"
                    ),
                )
            return Nack(kind, bounded(str(outcome.message)))
        return Nack(HANDLER_ERROR, f"nack with an empty or non-string kind: {outcome.kind!r}")
    return Nack(HANDLER_ERROR, f"the handler returned {type(outcome).__name__}, not Ack or Nack")


def error_outcome(exc: BaseException) -> Nack:
    """The nack for a handler that raised: its exception type and text."""
    try:
        text = str(exc)
    except BaseException:  # this nack is the task's only answer: it must not raise
        text = "(the exception's text could not be read)"
    return Nack(HANDLER_ERROR, bounded(f"{type(exc).__name__}: {text}"))


def result_value(task: Task, outcome: Outcome, route: str = DEFAULT_PIPELINE) -> bytes:
    """The ``results`` value of an ack or a nack for ``task``, from a worker of ``route``."""
    if isinstance(outcome, Ack):
        return encode_result(_result(task, "ack", route, ack_ms=outcome.ack_ms))
    error = ErrorInfo(outcome.kind, outcome.message)
    return encode_result(_result(task, "nack", route, error=error))


def heartbeat_value(task: Task, route: str = DEFAULT_PIPELINE) -> bytes:
    """The ``results`` value saying that ``task`` is still being worked on."""
    return encode_result(_result(task, "heartbeat", route))


def bounded(text: str) -> str:
    """``text`` cut to ``MAX_MESSAGE_CHARS``, so a huge exception text cannot bloat a result."""
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + "…"


def _result(
    task: Task,
    outcome: ResultOutcome,
    route: str,
    ack_ms: int | None = None,
    error: ErrorInfo | None = None,
) -> Result:
    return Result(
        task.stream_id,
        task.start_ms,
        task.end_ms,
        task.attempt,
        outcome,
        ack_ms,
        error,
        task.incarnation,
        None if route == DEFAULT_PIPELINE else route,
    )


def heartbeat_report(task_id: str) -> Delivered:
    """The delivery report of a heartbeat: a failure is logged, never retried (the next
    heartbeat, or the result, follows)."""

    def delivered(error: str | None) -> None:
        if error is not None:
            log.warning("heartbeat of task %s not delivered: %s", task_id, error)

    return delivered
