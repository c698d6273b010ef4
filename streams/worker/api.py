"""The handler API: a task window goes in, an ack or a nack comes out.

A handler is any callable ``(Task) -> Ack | Nack``. It must not raise for an expected
failure (a source down, no data, a failed export): it answers with a ``Nack`` whose
``kind`` the coordinator can act on (retry, or bypass at once for non-retryable kinds).
The runtime turns anything a handler raises into a ``handler_error`` nack.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Protocol

from streams.errors import InvalidInput

# Nack kinds used across Tidemark, in one place so that stream configs
# (`non_retryable`) and dashboards can rely on the spelling.
BAD_PARAMS: Final = "bad_params"  # the task's params cannot be used; retrying will not help
CORE_METRIC: Final = "core_metric"  # a core source query failed
NO_DATA: Final = "no_data"  # the window holds no data point
EXPORT: Final = "export"  # the downstream export failed or timed out
OUTAGE: Final = "outage"  # the synthetic pipeline's outage switch is on
SYNTHETIC_FAILURE: Final = "synthetic_failure"  # the synthetic pipeline's drawn failure
HANDLER_ERROR: Final = "handler_error"  # the handler raised (set by the runtime)
SHUTDOWN: Final = "shutdown"  # the worker stopped before the task finished (set by the runtime)

_INT_FIELDS: Final = (
    "start_ms",
    "end_ms",
    "step_ms",
    "attempt",
    "dispatched_ms",
    "deadline_ms",
)


@dataclass(frozen=True)
class Task:
    """One attempt at one window ``(start_ms, end_ms]`` of a stream, as dispatched on ``tasks``.

    All times are epoch milliseconds. ``params`` is the stream's opaque JSON object; it is
    a read-only view so that a handler cannot change what another attempt sees.
    """

    task_id: str
    stream_id: str
    start_ms: int
    end_ms: int
    step_ms: int
    attempt: int
    dispatched_ms: int
    deadline_ms: int
    params: Mapping[str, Any]
    replay: bool = False

    @classmethod
    def from_wire(cls, value: Mapping[str, Any]) -> Task:
        """Decode a ``tasks`` JSON value; raises ``InvalidInput`` naming the first bad field.

        Extra fields are ignored, as the wire contract allows.
        """
        if not isinstance(value, Mapping):
            raise InvalidInput("task", f"expected a JSON object, got {type(value).__name__}")
        ids = {name: _non_empty_str(value, name) for name in ("task_id", "stream_id")}
        ints = {name: _int(value, name) for name in _INT_FIELDS}
        if ints["start_ms"] >= ints["end_ms"]:
            raise InvalidInput("end_ms", "must be greater than start_ms")
        if ints["step_ms"] <= 0:
            raise InvalidInput("step_ms", "must be positive")
        if ints["attempt"] < 0:
            raise InvalidInput("attempt", "must not be negative")
        params = _required(value, "params")
        if not isinstance(params, Mapping):
            raise InvalidInput("params", "must be a JSON object")
        replay = value.get("replay", False)
        if not isinstance(replay, bool):
            raise InvalidInput("replay", "must be a boolean")
        return cls(
            task_id=ids["task_id"],
            stream_id=ids["stream_id"],
            params=MappingProxyType(dict(params)),
            replay=replay,
            **ints,
        )

    def to_wire(self) -> dict[str, Any]:
        """The JSON object ``from_wire`` reads back (for producers and tests)."""
        return {
            "task_id": self.task_id,
            "stream_id": self.stream_id,
            **{name: getattr(self, name) for name in _INT_FIELDS},
            "params": dict(self.params),
            "replay": self.replay,
        }


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


def _required(value: Mapping[str, Any], name: str) -> Any:
    if name not in value:
        raise InvalidInput(name, "is required")
    return value[name]


def _non_empty_str(value: Mapping[str, Any], name: str) -> str:
    raw = _required(value, name)
    if not isinstance(raw, str) or not raw:
        raise InvalidInput(name, "must be a non-empty string")
    return raw


def _int(value: Mapping[str, Any], name: str) -> int:
    raw = _required(value, name)
    # bool is an int subclass in Python, but `true` is never a valid time or count.
    if not isinstance(raw, int) or isinstance(raw, bool):
        raise InvalidInput(name, f"must be an integer, got {type(raw).__name__}")
    return raw
