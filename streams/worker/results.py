"""The worker's side of the wire: decode a ``tasks`` value, encode a ``results`` value.

Pure functions, so the runtime's adapter code only moves bytes. A result echoes the task's
``stream_id``, ``start_ms``, ``end_ms`` and ``attempt``, which is how the coordinator finds the
attempt it answers; its key is the ``stream_id`` (UTF-8), so that one stream's results stay in
order on one partition.
"""

from __future__ import annotations

import json
from typing import Any, Final

from streams.errors import InvalidInput
from streams.handler import HANDLER_ERROR, Ack, Nack, Outcome, Task

MAX_MESSAGE_CHARS: Final = 1000


def decode_task(value: bytes | None) -> Task:
    """A ``Task`` from a ``tasks`` message value; raises ``InvalidInput`` if it cannot be one."""
    if value is None:
        raise InvalidInput("task", "the message has no value")
    try:
        decoded = json.loads(value)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise InvalidInput("task", f"not UTF-8 JSON: {exc}") from exc
    except RecursionError as exc:  # nested too deeply: must not escape the loop's guard
        raise InvalidInput("task", "JSON nested too deeply") from exc
    task = Task.from_wire(decoded)
    try:  # JSON escapes can spell lone surrogates, which no result key or value can carry
        result_key(task)
    except UnicodeEncodeError as exc:
        raise InvalidInput("stream_id", f"cannot be encoded as UTF-8: {exc}") from exc
    return task


def checked_outcome(task: Task, outcome: object) -> Outcome:
    """The handler's answer if the coordinator can accept it, else a ``handler_error`` nack.

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
        if isinstance(outcome.kind, str) and outcome.kind:
            return Nack(outcome.kind, bounded(str(outcome.message)))
        return Nack(HANDLER_ERROR, f"nack with an empty or non-string kind: {outcome.kind!r}")
    return Nack(HANDLER_ERROR, f"the handler returned {type(outcome).__name__}, not Ack or Nack")


def error_outcome(exc: BaseException) -> Nack:
    """The nack for a handler that raised: its exception type and text."""
    try:
        text = str(exc)
    except BaseException:  # this nack is the task's only answer: it must not raise
        text = "(the exception's text could not be read)"
    return Nack(HANDLER_ERROR, bounded(f"{type(exc).__name__}: {text}"))


def result_value(task: Task, outcome: Outcome) -> bytes:
    """The ``results`` value of an ack or a nack for ``task``."""
    if isinstance(outcome, Ack):
        return _encode(task, outcome="ack", ack_ms=outcome.ack_ms)
    return _encode(task, outcome="nack", error={"kind": outcome.kind, "message": outcome.message})


def heartbeat_value(task: Task) -> bytes:
    """The ``results`` value saying that ``task`` is still being worked on."""
    return _encode(task, outcome="heartbeat")


def result_key(task: Task) -> bytes:
    """The ``results`` key: the stream id, as the coordinator partitions by it."""
    return task.stream_id.encode("utf-8")


def bounded(text: str) -> str:
    """``text`` cut to ``MAX_MESSAGE_CHARS``, so a huge exception text cannot bloat a result."""
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + "…"


def _encode(task: Task, **fields: Any) -> bytes:
    value = {
        "stream_id": task.stream_id,
        "start_ms": task.start_ms,
        "end_ms": task.end_ms,
        "attempt": task.attempt,
        **fields,
    }
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    # A handler's kind or message may hold lone surrogates (e.g. an OS error's text); they
    # cannot be UTF-8, so they become "?" rather than an exception in the loop thread.
    # (decode_task has refused a stream id with them.)
    return text.encode("utf-8", "replace")
