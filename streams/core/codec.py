"""A stream's state as JSON-compatible values, and back, in two forms.

- The stored form (`state_to_row`, schema 2), what the coordinator writes to its store and
  changelog on every change: a positional list, `[2, config, downstream_ms, announced_ms,
  frontier_ms, paused, windows, unannounced, incarnation, finished_ms, deleted_ms]`, each window
  a positional list too (`_WINDOW_FIELDS`; its wait for admission, `waiting_since_ms` and
  `waited_ms`, only when it has one: a state without waits is stored byte for byte as before
  the gate existed, and a row stored before reads as windows without waits). It is the hot
  path's largest cost (an encode per changed stream per transaction), and a list is built and
  encoded in 3.3 µs where the dict below took 4.4 (timeit, one window in flight and three
  unannounced), 17 % fewer bytes.
  Its config (`config_to_stored`) leaves out the fields that hold their default: a stream
  created with few options stores about 80 bytes of config instead of 340. The config was most
  of a record, which every change of a stream writes to the changelog (a live stream of 1 s
  windows: 363 bytes a record against 614 with the whole config).
- The readable form (`state_to_dict`, schema "v": 1): a dict whose window fields that hold
  their default (0, None, False, empty) are left out. Stores written before schema 2 hold it,
  so `state_from_stored` reads both; tests compare states through it.

In both, committed windows are `[start_ms, end_ms, reason, attempts]` (and `held_ms` fifth when
the window was held by the outage guard), errors `[kind, message]`.
"""

from __future__ import annotations

from typing import Any, overload

from streams.core._checks import check_int, check_str
from streams.core.config import StreamConfig, config_from_dict, config_to_dict
from streams.core.model import CommittedWindow, ErrorInfo, StreamState, Window
from streams.errors import InvalidInput

SCHEMA_VERSION = 1  # the readable form
ROW_SCHEMA_VERSION = 2  # the stored form

# The fields a stored config leaves out when they hold these values, and the values a stored
# config that lacks them is read with: StreamConfig's defaults when the stored form began to
# leave them out. They are part of the stored form, not copies of those defaults: were a default
# changed later, these stay, so that stored configs keep their meaning, and a config holding the
# new default stores it, since it differs from this table (test_codec says so if one moves).
STORED_CONFIG_DEFAULTS: dict[str, Any] = {
    "window_ms": 60_000,
    "step_ms": 15_000,
    "delay_ms": 0,
    "task_timeout_ms": 60_000,
    "bypass_after_ms": 300_000,
    "retry": {"strategy": "fixed", "interval_ms": 60_000},
    "max_attempts": None,
    "non_retryable": [],
    "max_in_flight": 1,
    "params": {},
    "end_ms": None,
    "gc_grace_ms": 48 * 3_600_000,
    "bypass_retention_ms": 30 * 86_400_000,
}
_ABSENT = object()


def config_to_stored(config: StreamConfig) -> dict[str, Any]:
    """The config as the stored form holds it: `config_to_dict` without the fields that hold
    their `STORED_CONFIG_DEFAULTS` value; `config_from_stored` inverts it."""
    defaults = STORED_CONFIG_DEFAULTS
    return {k: v for k, v in config_to_dict(config).items() if defaults.get(k, _ABSENT) != v}


def config_from_stored(doc: Any) -> StreamConfig:
    """Decode a stored config, with or without the fields `config_to_stored` leaves out (a
    record stored before it left them out holds them all)."""
    if not isinstance(doc, dict):
        raise InvalidInput("config", f"must be an object, got {type(doc).__name__}")
    return config_from_dict({**STORED_CONFIG_DEFAULTS, **doc})


def state_to_dict(state: StreamState, config_doc: Any = None) -> dict[str, Any]:
    """Encode `state`; `state_from_dict` inverts it exactly.

    `config_doc`, when given, stands for `config_to_dict(state.config)`: a caller that encodes
    the same config again and again passes it pre-encoded (the config rarely changes).
    """
    unannounced = state.unannounced
    d: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "config": config_to_dict(state.config) if config_doc is None else config_doc,
        "downstream_ms": state.downstream_ms,
        "announced_ms": state.announced_ms,
        "frontier_ms": state.frontier_ms,
        "paused": state.paused,
        "windows": list(map(_window_to_dict, state.windows)),
        "unannounced": list(map(committed_to_list, unannounced)) if unannounced else [],
        "incarnation": state.incarnation,
    }
    if state.finished_ms is not None:
        d["finished_ms"] = state.finished_ms
    if state.deleted_ms is not None:
        d["deleted_ms"] = state.deleted_ms
    return d


def state_from_dict(d: Any) -> StreamState:
    """Decode a dict made by `state_to_dict`; a malformed one raises InvalidInput."""
    if not isinstance(d, dict):
        raise InvalidInput("state", f"must be an object, got {type(d).__name__}")
    if d.get("v") != SCHEMA_VERSION:
        raise InvalidInput("v", f"unsupported state schema version {d.get('v')!r}")
    try:
        paused = d["paused"]
        if type(paused) is not bool:
            raise InvalidInput("paused", "must be a boolean")
        return StreamState(
            config=config_from_dict(d["config"]),
            downstream_ms=check_int("downstream_ms", d["downstream_ms"]),
            announced_ms=check_int("announced_ms", d["announced_ms"]),
            frontier_ms=check_int("frontier_ms", d["frontier_ms"]),
            paused=paused,
            windows=[_window_from_dict(w) for w in d["windows"]],
            unannounced=[committed_from_list("unannounced", c) for c in d["unannounced"]],
            # absent in states stored before incarnations: 0
            incarnation=check_int("incarnation", d.get("incarnation", 0), 0),
            finished_ms=_int_or(d.get("finished_ms"), None, "finished_ms"),
            deleted_ms=_int_or(d.get("deleted_ms"), None, "deleted_ms"),
        )
    except KeyError as exc:
        raise InvalidInput(str(exc.args[0]), "is required") from exc
    except (TypeError, ValueError, AttributeError) as exc:
        raise InvalidInput("state", f"malformed: {exc}") from exc


def state_to_row(state: StreamState, config_doc: Any = None) -> list[Any]:
    """The stored form of `state`; `state_from_row` inverts it exactly. `config_doc`, when
    given, stands for `config_to_stored(state.config)`, as in `state_to_dict`."""
    unannounced = state.unannounced
    return [
        ROW_SCHEMA_VERSION,
        config_to_stored(state.config) if config_doc is None else config_doc,
        state.downstream_ms,
        state.announced_ms,
        state.frontier_ms,
        state.paused,
        [*map(_window_to_row, state.windows)],
        [*map(committed_to_list, unannounced)] if unannounced else [],
        state.incarnation,
        state.finished_ms,
        state.deleted_ms,
    ]


def state_from_row(row: Any) -> StreamState:
    """Decode a list made by `state_to_row`; a malformed one raises InvalidInput."""
    if type(row) is not list or not row or row[0] != ROW_SCHEMA_VERSION:
        version = row[0] if type(row) is list and row else None
        raise InvalidInput("v", f"unsupported state schema version {version!r}")
    if len(row) != 11:
        raise InvalidInput("state", f"must hold 11 fields, got {len(row)}")
    (_, config, downstream_ms, announced_ms, frontier_ms, paused, windows, unannounced,
     incarnation, finished_ms, deleted_ms) = row  # fmt: skip
    if type(paused) is not bool:
        raise InvalidInput("paused", "must be a boolean")
    if type(windows) is not list or type(unannounced) is not list:
        raise InvalidInput("state", "windows and unannounced must be lists")
    try:
        return StreamState(
            config=config_from_stored(config),
            downstream_ms=check_int("downstream_ms", downstream_ms),
            announced_ms=check_int("announced_ms", announced_ms),
            frontier_ms=check_int("frontier_ms", frontier_ms),
            paused=paused,
            windows=[_window_from_row(w) for w in windows],
            unannounced=[committed_from_list("unannounced", c) for c in unannounced]
            if unannounced
            else [],
            incarnation=check_int("incarnation", incarnation, 0),
            finished_ms=_int_or(finished_ms, None, "finished_ms"),
            deleted_ms=_int_or(deleted_ms, None, "deleted_ms"),
        )
    except (TypeError, ValueError, AttributeError) as exc:
        raise InvalidInput("state", f"malformed: {exc}") from exc


def state_from_stored(doc: Any) -> StreamState:
    """Decode either stored form: a row (schema 2) or a dict (schema 1, stored before rows)."""
    return state_from_row(doc) if type(doc) is list else state_from_dict(doc)


# A window's stored row, in this order; the last two (its wait for admission, streams.core.waiting)
# only when either differs from its default (None, 0).
_WINDOW_FIELDS = (
    "start_ms", "end_ms", "due_ms", "attempt", "in_flight", "dispatched_ms", "deadline_ms",
    "first_failed_ms", "retried_count", "last_error", "finished", "closed", "held_since_ms",
    "waiting_since_ms", "waited_ms",
)  # fmt: skip
_WINDOW_ROW_LENGTHS = (len(_WINDOW_FIELDS) - 2, len(_WINDOW_FIELDS))


def _window_to_row(w: Window) -> list[Any]:
    error = w.last_error
    closed = w.closed
    row = [
        w.start_ms,
        w.end_ms,
        w.due_ms,
        w.attempt,
        w.in_flight,
        w.dispatched_ms,
        w.deadline_ms,
        w.first_failed_ms,
        w.retried_count,
        None if error is None else [error.kind, error.message],
        w.finished,
        [*map(committed_to_list, closed)] if closed else [],
        w.held_since_ms,
    ]
    if w.waiting_since_ms is not None or w.waited_ms:
        row += (w.waiting_since_ms, w.waited_ms)
    return row


def _window_from_row(row: Any) -> Window:
    if type(row) is not list or len(row) not in _WINDOW_ROW_LENGTHS:
        short, full = _WINDOW_ROW_LENGTHS
        raise InvalidInput("windows", f"each must be a list of {short} or {full} fields")
    return _window(*row)


def _window(
    start_ms: Any,
    end_ms: Any,
    due_ms: Any,
    attempt: Any,
    in_flight: Any,
    dispatched_ms: Any,
    deadline_ms: Any,
    first_failed_ms: Any,
    retried_count: Any,
    error: Any,
    finished: Any,
    closed: Any,
    held_since_ms: Any,
    waiting_since_ms: Any = None,
    waited_ms: Any = _ABSENT,
) -> Window:
    """A window from its stored fields (a row's, in `_WINDOW_FIELDS` order, or a readable dict's
    with its defaults filled in), each checked; a malformed one raises InvalidInput."""
    if type(in_flight) is not bool or type(finished) is not bool:
        raise InvalidInput("windows", "in_flight and finished must be booleans")
    if error is not None:
        kind, message = error
        error = ErrorInfo(
            check_str("windows.last_error", kind), check_str("windows.last_error", message)
        )
    if type(closed) is not list:
        raise InvalidInput("windows.closed", "must be a list")
    window = Window(
        start_ms=check_int("windows.start_ms", start_ms),
        end_ms=check_int("windows.end_ms", end_ms),
        due_ms=check_int("windows.due_ms", due_ms),
        attempt=check_int("windows.attempt", attempt),
        in_flight=in_flight,
        dispatched_ms=_int_or(dispatched_ms, None, "windows.dispatched_ms"),
        deadline_ms=_int_or(deadline_ms, None, "windows.deadline_ms"),
        first_failed_ms=_int_or(first_failed_ms, None, "windows.first_failed_ms"),
        retried_count=check_int("windows.retried_count", retried_count),
        last_error=error,
        finished=finished,
        # no comprehension (a function made and called) for the usual empty list
        closed=[committed_from_list("windows.closed", c) for c in closed] if closed else [],
        held_since_ms=_int_or(held_since_ms, None, "windows.held_since_ms"),
    )
    # Set only when stored: two keywords more to Window() cost a restore about 1,000
    # instructions per window (callgrind), these two checks about 100.
    if waiting_since_ms is not None:
        window.waiting_since_ms = _int_or(waiting_since_ms, None, "windows.waiting_since_ms")
    if waited_ms is not _ABSENT:
        window.waited_ms = check_int("windows.waited_ms", waited_ms, 0)
    return window


def _window_to_dict(window: Window) -> dict[str, Any]:
    d: dict[str, Any] = {
        "start_ms": window.start_ms,
        "end_ms": window.end_ms,
        "due_ms": window.due_ms,
    }
    if window.attempt:
        d["attempt"] = window.attempt
    if window.in_flight:
        d["in_flight"] = True
    if window.dispatched_ms is not None:
        d["dispatched_ms"] = window.dispatched_ms
    if window.deadline_ms is not None:
        d["deadline_ms"] = window.deadline_ms
    if window.first_failed_ms is not None:
        d["first_failed_ms"] = window.first_failed_ms
    if window.retried_count:
        d["retried_count"] = window.retried_count
    if window.last_error is not None:
        d["last_error"] = [window.last_error.kind, window.last_error.message]
    if window.finished:
        d["finished"] = True
    if window.closed:
        d["closed"] = [committed_to_list(done) for done in window.closed]
    if window.held_since_ms is not None:
        d["held_since_ms"] = window.held_since_ms
    if window.waiting_since_ms is not None:
        d["waiting_since_ms"] = window.waiting_since_ms
    if window.waited_ms:
        d["waited_ms"] = window.waited_ms
    return d


def _window_from_dict(d: dict[str, Any]) -> Window:
    """The readable form leaves out the fields that hold their default (`_window_to_dict`)."""
    get = d.get
    return _window(
        d["start_ms"], d["end_ms"], d["due_ms"], get("attempt", 0), get("in_flight", False),
        get("dispatched_ms"), get("deadline_ms"), get("first_failed_ms"), get("retried_count", 0),
        get("last_error"), get("finished", False), get("closed", []), get("held_since_ms"),
        get("waiting_since_ms"), get("waited_ms", _ABSENT),
    )  # fmt: skip


@overload
def _int_or(value: Any, default: int, field: str) -> int: ...
@overload
def _int_or(value: Any, default: None, field: str) -> int | None: ...
def _int_or(value: Any, default: int | None, field: str) -> int | None:
    if value is None:
        return default
    if type(value) is not int:
        raise InvalidInput(field, f"must be an integer, got {type(value).__name__}")
    return value


def committed_to_list(done: CommittedWindow) -> list[Any]:
    """`[start_ms, end_ms, reason, attempts]`, plus `held_ms` when the window was held."""
    if done.held_ms is None:
        return [done.start_ms, done.end_ms, done.reason, done.attempts]
    return [done.start_ms, done.end_ms, done.reason, done.attempts, done.held_ms]


def committed_from_list(field: str, item: list[Any]) -> CommittedWindow:
    """Invert `committed_to_list`; a malformed item raises InvalidInput naming `field`."""
    if not isinstance(item, list) or len(item) not in (4, 5):
        raise InvalidInput(field, "must be [start_ms, end_ms, reason, attempts(, held_ms)]")
    start_ms, end_ms, reason, attempts = item[:4]
    if reason not in ("ack", "bypass", "replayed"):
        raise InvalidInput(field, f"unknown reason {reason!r}")
    held_ms = check_int(field, item[4], 0) if len(item) == 5 else None
    return CommittedWindow(
        check_int(field, start_ms),
        check_int(field, end_ms),
        reason,
        check_int(field, attempts),
        held_ms,
    )
