"""The data of the window lifecycle: a stream's state, its inputs and its outputs.

A `StreamState` and its `Window`s are mutable: the lifecycle functions update them in place, for
speed. Everything that crosses the boundary (results, controls, tasks, commits, bypass records and
decisions) is frozen. Wire dicts (`to_wire`) are JSON-compatible and use the issue's field names.

The values made for every input (ErrorInfo, Result, CommittedWindow, Task, Commit, Decision) are
frozen `msgspec.Struct`s, the core's one dependency outside the standard library: one of five
fields is made in C in about 900 instructions, against 4,900 for a frozen slotted dataclass
whose `__init__` sets each slot through its descriptor, and reads as fast (callgrind; the
Processor's instructions per result fell by 15 %, docs/benchmarks.md "fifth pass"). Those whose
fields hold only numbers, strings, each other and JSON values (a task's params) cannot be part
of a reference cycle, so the garbage collector leaves them out (`gc=False`). Copy one with a
change through `msgspec.structs.replace`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias

import msgspec

from streams.core.config import DEFAULT_PIPELINE, StreamConfig

# What a `results` value reports (not the handler API's `streams.handler.Outcome`, Ack | Nack).
ResultOutcome: TypeAlias = Literal["ack", "nack", "heartbeat"]
CloseReason: TypeAlias = Literal["ack", "bypass", "replayed"]
Ignored: TypeAlias = Literal["stale", "duplicate"]


class ErrorInfo(msgspec.Struct, frozen=True, gc=False):
    """Why an attempt failed: a machine-readable `kind` ("no_data", "timeout", ...) and text."""

    kind: str
    message: str

    def to_wire(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


# The error of a nack that carries none.
NACK_WITHOUT_ERROR: Final = ErrorInfo("unknown", "nack without an error")


def task_id(stream_id: str, start_ms: int, attempt: int) -> str:
    """The id of one dispatch of a window: "{stream_id}/{start_ms}/{attempt}"."""
    return f"{stream_id}/{start_ms}/{attempt}"


def _wire_builtin(value: Any) -> Any:
    """A value msgspec does not render itself, as one it does: a task's read-only params, as
    their JSON. Every task of a config carries the config's own params object, so the JSON is
    kept per object (it is read-only): a task with three params then encodes in 0.45-0.7 µs
    instead of 1.0-1.6 µs (timeit, the two side by side)."""
    if isinstance(value, MappingProxyType):
        cached = _PARAMS_JSON.get(id(value))
        if cached is None:
            if len(_PARAMS_JSON) >= _PARAMS_JSON_MAX:
                _PARAMS_JSON.clear()
            cached = _PARAMS_JSON[id(value)] = (value, msgspec.Raw(to_json(dict(value))))
        return cached[1]
    raise NotImplementedError(f"{type(value).__name__} has no wire form")


# Params objects by id, each kept alive beside its JSON so that the id cannot be reused while
# its entry is here; emptied when full (a miss only costs an encode).
_PARAMS_JSON: dict[int, tuple[MappingProxyType[str, Any], msgspec.Raw]] = {}
_PARAMS_JSON_MAX: Final = 10_000


# A Struct's wire JSON: its fields in order, those at their default left out where the class
# says `omit_defaults` (a task's `replay`, `incarnation` and `pipeline`, a window's `held_ms`). What
# `streams.wire` writes for tasks and commits.
to_json = msgspec.json.Encoder(enc_hook=_wire_builtin).encode
_JSON_DECODE = msgspec.json.Decoder().decode


def to_wire(value: msgspec.Struct) -> Any:
    """A Struct as its wire dict: `to_json` read back (sequences as lists), so that the two
    have one shape; off the hot path."""
    return _JSON_DECODE(to_json(value))


def bypass_key(stream_id: str, start_ms: int) -> str:
    """The `bypassed` key of the window starting at `start_ms`: "{stream_id}/{start_ms}"."""
    return f"{stream_id}/{start_ms}"


class Result(msgspec.Struct, frozen=True, gc=False):
    """A worker's report on one attempt of the window (start_ms, end_ms].

    `ack_ms` is required for an ack; `error` describes a nack (a nack without one counts as
    `NACK_WITHOUT_ERROR`). `incarnation` echoes the task's; None (a worker that sends none)
    stands for the stream's current incarnation. `pipeline` is the worker's; None (a worker
    older than pipelines) stands for the default pipeline (streams.core.results.other_pipeline).
    """

    stream_id: str
    start_ms: int
    end_ms: int
    attempt: int
    outcome: ResultOutcome
    ack_ms: int | None = None
    error: ErrorInfo | None = None
    incarnation: int | None = None
    pipeline: str | None = None


class CommittedWindow(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """An interval (start_ms, end_ms] closed by one ack or one bypass (or a replay).

    `attempts` counts the window's dispatches, the closing one and shutdowns included (unlike
    `BypassRecord.attempts`, which counts failures). `held_ms`: how long the outage guard held
    the window's bypass before it closed (None: it was never held; see streams.core.outage).
    """

    start_ms: int
    end_ms: int
    reason: CloseReason
    attempts: int
    held_ms: int | None = None

    def to_wire(self) -> dict[str, Any]:
        return to_wire(self)  # type: ignore[no-any-return]


@dataclass(slots=True)
class Window:
    """One outstanding window (start_ms, end_ms] of a stream, with its attempt and retry state.

    `attempt` is the last dispatched attempt (0 if never); `in_flight` says that attempt awaits its
    result, until `deadline_ms`. A waiting window is dispatched once `now_ms >= due_ms`.
    `closed` holds intervals of this window that are finished but not yet passed by
    `downstream_ms`: the prefix before `start_ms` left by partial acks, and, once `finished`, the
    window's own closing interval. `held_since_ms`: when the outage guard first held the
    window's time-based bypass (the failure at which the seed's rule would have bypassed it).
    `waiting_since_ms`: when the gate first denied the window's pending dispatch (None: it does
    not wait); `waited_ms`: how long it waited for admission after its first failure, which its
    time-based bypass does not count (streams.core.waiting).
    """

    start_ms: int
    end_ms: int
    due_ms: int
    attempt: int = 0
    in_flight: bool = False
    dispatched_ms: int | None = None
    deadline_ms: int | None = None
    first_failed_ms: int | None = None
    retried_count: int = 0
    last_error: ErrorInfo | None = None
    finished: bool = False
    closed: list[CommittedWindow] = field(default_factory=list)
    held_since_ms: int | None = None
    waiting_since_ms: int | None = None
    waited_ms: int = 0


@dataclass(slots=True)
class StreamState:
    """Everything the core knows about one stream; small and bounded (see `state_to_dict`).

    `downstream_ms`: every point at or before it is delivered or bypassed; it never decreases.
    `announced_ms`: the `downstream_ms` of the last flushed Commit; `unannounced` holds the
    committed windows in (announced_ms, downstream_ms], in order.
    `frontier_ms`: where the next generated window starts.
    `windows`: the outstanding windows in order, at most `config.max_in_flight` of them.
    `incarnation`: which creation of the stream this is (`incarnation_of`); its tasks carry it,
    so that a result for the stream before a delete and re-create is told apart. 0: a state
    stored before incarnations existed.
    `finished_ms`: when `downstream_ms` reached the config's `end_ms` (None: not finished);
    `deleted_ms`: when it was deleted. Either way the state is kept for `gc_grace_ms`, to
    answer late results with a reason, then collected (`streams.core.lifecycle.advance`).
    """

    config: StreamConfig
    downstream_ms: int
    announced_ms: int
    frontier_ms: int
    paused: bool = False
    windows: list[Window] = field(default_factory=list)
    unannounced: list[CommittedWindow] = field(default_factory=list)
    incarnation: int = 0
    finished_ms: int | None = None
    deleted_ms: int | None = None

    @property
    def ended(self) -> bool:
        """Finished or deleted: nothing more to dispatch, kept until it is collected."""
        return self.finished_ms is not None or self.deleted_ms is not None

    def collect_at_ms(self) -> int | None:
        """When an ended stream's state is collected (None while it runs)."""
        at_ms = self.deleted_ms if self.deleted_ms is not None else self.finished_ms
        return None if at_ms is None else at_ms + self.config.gc_grace_ms


class Task(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """One dispatch of a window to the workers, its id from `task_id(...)`.

    `streams.wire.decode_task` decodes it from a `tasks` value.
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
    replay: bool = False  # a bypassed window dispatched again (streams.core.replay)
    incarnation: int | None = None  # the stream's (None: from a coordinator without them)
    # The stream's. Left out of the wire when it is the default pipeline's (omit_defaults), as
    # a task of a coordinator older than pipelines is: such tasks keep their bytes.
    pipeline: str = DEFAULT_PIPELINE

    def to_wire(self) -> dict[str, Any]:
        return to_wire(self)  # type: ignore[no-any-return]


class Commit(msgspec.Struct, frozen=True, gc=False):
    """An announcement that `downstream_ms` moved from `previous_ms`, covering `windows` exactly."""

    stream_id: str
    downstream_ms: int
    previous_ms: int
    committed_ms: int
    windows: tuple[CommittedWindow, ...]

    def to_wire(self) -> dict[str, Any]:
        return to_wire(self)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class BypassRecord:
    """A window given up after `attempts` failures, kept so that it can be replayed later.

    `attempts` counts failures (nacks and timeouts; shutdowns only past the window's first
    `lifecycle.SHUTDOWN_REQUEUES_MAX`), unlike `CommittedWindow.attempts`, which counts
    dispatches. `dispatches` (not on the wire, 0 when unknown): the live lane's last attempt of
    the window, after which the replay lane numbers its own attempts, so that a replay's task
    id and results never equal a live attempt's.
    """

    stream_id: str
    start_ms: int
    end_ms: int
    attempts: int
    first_failed_ms: int
    bypassed_ms: int
    last_error: ErrorInfo | None
    # Not on the wire, so not part of what a record is: one read back from `bypassed` equals
    # the one that was written.
    dispatches: int = field(default=0, compare=False)

    @property
    def key(self) -> str:
        return bypass_key(self.stream_id, self.start_ms)

    def to_wire(self) -> dict[str, Any]:
        return {
            "stream_id": self.stream_id,
            "start_ms": self.start_ms,
            "end_ms": self.end_ms,
            "attempts": self.attempts,
            "first_failed_ms": self.first_failed_ms,
            "bypassed_ms": self.bypassed_ms,
            "last_error": None if self.last_error is None else self.last_error.to_wire(),
        }


@dataclass(frozen=True, slots=True)
class Upsert:
    """Create a stream, or replace its config (see `apply_control`); `paused`: a stream created
    by it starts paused (an existing stream keeps its paused flag)."""

    config: StreamConfig
    paused: bool = False


@dataclass(frozen=True, slots=True)
class Pause:
    """Stop dispatching; results and deadlines are still processed."""

    stream_id: str


@dataclass(frozen=True, slots=True)
class Resume:
    """Undo a Pause."""

    stream_id: str


@dataclass(frozen=True, slots=True)
class Delete:
    """Forget the stream; later results for it are rejected."""

    stream_id: str


Control: TypeAlias = Upsert | Pause | Resume | Delete


class Decision(msgspec.Struct, frozen=True):
    """What one input did to a stream.

    `state` is the stream's state after the input (the same object that was passed in, updated in
    place) or None when the stream is absent or deleted. When `rejected` (a reason) or `ignored`
    ("stale" or "duplicate") is set, nothing changed and nothing was dispatched. `timeouts` counts
    deadlines that passed in this decision, `requeues` failures that were scheduled for a retry.
    """

    state: StreamState | None
    tasks: tuple[Task, ...] = ()
    bypasses: tuple[BypassRecord, ...] = ()
    rejected: str | None = None
    ignored: Ignored | None = None
    timeouts: int = 0
    requeues: int = 0
