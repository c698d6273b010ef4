"""The cluster as its public topics tell it: every stream's progress and the bypassed windows.

Built by reading `control`, `tasks`, `results`, `commits` and `bypassed` from the beginning (not
from a coordinator's table), so it shows the whole cluster whichever coordinator owns what.
`apply` is pure and order-tolerant: the topics are read side by side, so one stream's commit may
be applied before the task or nack that caused it, and the rules below give the same views
either way:

| topic    | what it changes                                                                |
|----------|--------------------------------------------------------------------------------|
| control  | upsert: config (validated as the coordinator does), not deleted; pause/resume: |
|          | paused (of a known stream); delete: the stream disappears until an upsert      |
|          | re-creates it, and its tasks, nacks and commits are ignored until then         |
| tasks    | window and attempt of the latest live-lane task (replay tasks are left out)    |
| results  | a nack sets last_error, unless its window starts before downstream_ms          |
| commits  | downstream_ms and last_commit_ms only move forward; a nack of a window now     |
|          | before downstream_ms is cleared                                                |
| bypassed | the listed windows by key `{stream_id}/{start_ms}`; a None value unlists       |

Invalid values are ignored, like the coordinator rejects them. A stream is shown once an upsert,
task, commit or bypass names it; pause and nack alone do not make a stream.
"""

from __future__ import annotations

import copy
import shlex
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from streams.coordinator.topics import Topics
from streams.core.config import config_from_dict, config_to_dict
from streams.errors import BrokerUnavailable, InvalidInput
from streams.humanize import format_time
from streams.kafka.settings import KafkaSettings
from streams.kafka.topic_io import Record, TopicReader

TOPICS = ("control", "tasks", "results", "commits", "bypassed")


@dataclass
class StreamView:
    """One stream as the topics show it; `lag_ms` and `state` take the time as an argument."""

    stream_id: str
    config: dict[str, Any] | None = None
    paused: bool = False
    downstream_ms: int | None = None
    last_commit_ms: int | None = None
    window: tuple[int, int] | None = None
    attempt: int = 0
    last_error: dict[str, str] | None = None
    bypasses: int = 0

    def lag_ms(self, now_ms: int) -> int | None:
        """How far progress is behind `now_ms`: from downstream_ms, or before the first commit
        from start_ms truncated to step_ms (where the coordinator starts); None when neither is
        known."""
        if self.downstream_ms is not None:
            return now_ms - self.downstream_ms
        if self.config is not None:
            start_ms, step_ms = int(self.config["start_ms"]), int(self.config["step_ms"])
            return now_ms - (start_ms - start_ms % step_ms)
        return None

    def state(self, now_ms: int) -> str:
        """`paused`, `retrying`, `catching up` or `live`, in that order of precedence.

        Retrying: a nack since the last commit, or the latest task is a retry (attempt > 1) of a
        window not yet committed. Catching up: lag beyond 2 * window_ms + delay_ms.
        """
        if self.paused:
            return "paused"
        if self.last_error is not None or (self.attempt > 1 and not self._window_committed()):
            return "retrying"
        lag, config = self.lag_ms(now_ms), self.config
        if lag is not None and config is not None and lag > _behind_ms(config):
            return "catching up"
        return "live"

    def _window_committed(self) -> bool:
        return (
            self.window is not None
            and self.downstream_ms is not None
            and self.window[1] <= self.downstream_ms
        )


@dataclass(frozen=True)
class BypassView:
    """A window the coordinator gave up on, still listed on `bypassed` (so replayable)."""

    stream_id: str
    start_ms: int
    end_ms: int
    attempts: int
    first_failed_ms: int
    bypassed_ms: int
    last_error: dict[str, str] | None

    def replay_command(self) -> str:
        """The CLI command that replays exactly this window."""
        return (
            f"tidemark replay {shlex.quote(self.stream_id)} "
            f"--from {format_time(self.start_ms)} --to {format_time(self.end_ms)}"
        )


@dataclass
class _Record:
    """What is known of one stream id, shown or not (see the module's rules)."""

    view: StreamView
    shown: bool = False
    deleted: bool = False
    error_start_ms: int = 0

    def reset(self) -> None:
        self.view = StreamView(self.view.stream_id)
        self.error_start_ms = 0


class ReadModel:
    """The read model over one cluster's topics `{prefix}.*`; thread-safe for one refresher.

    `topics` narrows what `refresh` reads (the CLI only needs `control` to update a stream).
    """

    def __init__(
        self,
        settings: KafkaSettings,
        prefix: str = "tidemark",
        topics: Iterable[str] = TOPICS,
    ) -> None:
        self.settings = settings
        self.topics = Topics(prefix)
        self._short = {getattr(self.topics, name): name for name in topics}
        self._lock = threading.Lock()
        self._records: dict[str, _Record] = {}
        self._bypassed: dict[str, BypassView] = {}
        self._bypass_counts: Counter[str] = Counter()
        self._reader = TopicReader(settings, self._short, "tidemark-readmodel")
        self.caught_up = False  # whether the last refresh reached every high watermark

    # -- applying records (pure) ---------------------------------------------------------------

    def apply(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        """Apply one record of `topic` (a short name like "commits"); invalid ones are ignored."""
        with self._lock:
            self._apply(topic, key, value)

    def _apply(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        if topic == "bypassed" and value is None:
            self._unlist(_text(key))
            return
        doc = _json_object(value)
        if doc is None:
            return
        if topic == "control":
            self._on_control(key, doc)
        elif topic == "tasks":
            self._on_task(doc)
        elif topic == "results":
            self._on_result(doc)
        elif topic == "commits":
            self._on_commit(doc)
        elif topic == "bypassed":
            self._on_bypass(key, doc)

    def _live_record(self, stream_id: str) -> _Record | None:
        """The stream's record, or None while it is deleted: what the old stream emitted
        between its delete and the coordinator applying it must not reach a re-creation."""
        record = self._record(stream_id)
        return None if record.deleted else record

    def _record(self, stream_id: str) -> _Record:
        record = self._records.get(stream_id)
        if record is None:
            record = self._records[stream_id] = _Record(StreamView(stream_id))
        return record

    def _on_control(self, key: bytes | None, doc: dict[str, Any]) -> None:
        stream_id = doc.get("stream_id")
        if not isinstance(stream_id, str) or key != stream_id.encode():
            return  # the coordinator rejects a key that is not the stream id
        kind = doc.get("type")
        if kind == "upsert":
            try:
                config = config_to_dict(config_from_dict(doc))
            except InvalidInput:
                return
            record = self._record(stream_id)
            record.view.config = config
            record.shown, record.deleted = True, False
        elif kind in ("pause", "resume"):
            known = self._records.get(stream_id)
            if known is not None and not known.deleted:  # else the coordinator rejects it
                known.view.paused = kind == "pause"
        elif kind == "delete" and stream_id in self._records:
            record = self._records[stream_id]
            record.deleted = True
            record.reset()

    def _on_task(self, doc: dict[str, Any]) -> None:
        fields = _ints(doc, "start_ms", "end_ms", "attempt")
        stream_id = doc.get("stream_id")
        if fields is None or not isinstance(stream_id, str) or doc.get("replay") is True:
            return
        start_ms, end_ms, attempt = fields
        record = self._live_record(stream_id)
        if record is None:
            return
        record.shown = True
        record.view.window = (start_ms, end_ms)
        record.view.attempt = attempt

    def _on_result(self, doc: dict[str, Any]) -> None:
        if doc.get("outcome") != "nack":
            return
        stream_id, fields = doc.get("stream_id"), _ints(doc, "start_ms", "end_ms")
        error = _error(doc.get("error"))
        if not isinstance(stream_id, str) or fields is None or error is None:
            return
        record = self._live_record(stream_id)
        if record is None:
            return
        downstream_ms = record.view.downstream_ms
        if downstream_ms is not None and fields[0] < downstream_ms:
            return  # a window already committed (or a replay of a bypassed one)
        record.view.last_error = error
        record.error_start_ms = fields[0]

    def _on_commit(self, doc: dict[str, Any]) -> None:
        stream_id, fields = doc.get("stream_id"), _ints(doc, "downstream_ms", "committed_ms")
        if not isinstance(stream_id, str) or fields is None:
            return
        downstream_ms, committed_ms = fields
        record = self._live_record(stream_id)
        if record is None:
            return
        record.shown = True
        view = record.view
        view.downstream_ms = max(downstream_ms, view.downstream_ms or 0)
        view.last_commit_ms = max(committed_ms, view.last_commit_ms or 0)
        if view.last_error is not None and record.error_start_ms < view.downstream_ms:
            view.last_error = None

    def _on_bypass(self, key: bytes | None, doc: dict[str, Any]) -> None:
        fields = _ints(doc, "start_ms", "end_ms", "attempts", "first_failed_ms", "bypassed_ms")
        stream_id, error = doc.get("stream_id"), doc.get("last_error")
        if not isinstance(stream_id, str) or fields is None:
            return
        last_error = None if error is None else _error(error)
        if error is not None and last_error is None:
            return
        name = _text(key) or f"{stream_id}/{fields[0]}"
        self._unlist(name)
        start_ms, end_ms, attempts, first_failed_ms, bypassed_ms = fields
        self._bypassed[name] = BypassView(
            stream_id, start_ms, end_ms, attempts, first_failed_ms, bypassed_ms, last_error
        )
        self._bypass_counts[stream_id] += 1
        self._record(stream_id).shown = True

    def _unlist(self, key: str | None) -> None:
        old = self._bypassed.pop(key or "", None)
        if old is not None:
            self._bypass_counts[old.stream_id] -= 1

    # -- reading views -------------------------------------------------------------------------

    def streams(self) -> list[StreamView]:
        """Every stream shown and not deleted, by stream_id (copies, safe to keep)."""
        with self._lock:
            return [
                self._view(record)
                for _, record in sorted(self._records.items())
                if record.shown and not record.deleted
            ]

    def stream(self, stream_id: str) -> StreamView | None:
        """One stream, or None if it is unknown or deleted."""
        with self._lock:
            record = self._records.get(stream_id)
            if record is None or not record.shown or record.deleted:
                return None
            return self._view(record)

    def bypasses(self, limit: int | None = None) -> list[BypassView]:
        """Listed windows, the most recently bypassed first."""
        with self._lock:
            views = list(self._bypassed.values())
        views.sort(key=lambda b: (-b.bypassed_ms, b.stream_id, b.start_ms))
        return views if limit is None else views[:limit]

    def _view(self, record: _Record) -> StreamView:
        view = copy.copy(record.view)
        view.config = copy.deepcopy(view.config)
        view.last_error = None if view.last_error is None else dict(view.last_error)
        view.bypasses = self._bypass_counts[view.stream_id]
        return view

    # -- reading the topics --------------------------------------------------------------------

    def refresh(self, timeout_s: float = 5.0) -> None:
        """Read every topic from where the last call stopped up to its high watermark now.

        The first call starts at the beginning. Returns after `timeout_s` even if some
        partitions are still behind (`caught_up` says which happened; the next call goes on).
        Raises BrokerUnavailable if the cluster does not answer within `timeout_s`.
        """
        records: list[Record] = []
        try:
            self.caught_up = self._reader.read(timeout_s, records.extend)
        except BrokerUnavailable as exc:
            where = f"{self.topics.prefix}.* at {self.settings.bootstrap_servers}"
            raise BrokerUnavailable(f"could not read the topics {where}: {exc}") from exc
        # The topics are read side by side, so one topic can run ahead of another: apply what
        # was read in the order it was written (a delete, then the re-created stream's commits).
        records.sort(key=lambda record: record.timestamp_ms or 0)
        with self._lock:
            for record in records:
                self._apply(self._short[record.topic], record.key, record.value)

    def close(self) -> None:
        """Release the Kafka clients; the views stay readable."""
        self._reader.close()


def _behind_ms(config: Mapping[str, Any]) -> int:
    """The lag past which a stream is catching up: two windows and its delay."""
    return 2 * int(config["window_ms"]) + int(config["delay_ms"])


def _json_object(value: bytes | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def _ints(doc: Mapping[str, Any], *names: str) -> tuple[int, ...] | None:
    """The named fields if every one is a non-negative integer (not a bool), else None."""
    values: list[int] = []
    for name in names:
        value = doc.get(name)
        if type(value) is not int or value < 0:
            return None
        values.append(value)
    return tuple(values)


def _error(error: Any) -> dict[str, str] | None:
    if not isinstance(error, dict) or not isinstance(error.get("kind"), str) or not error["kind"]:
        return None
    message = error.get("message", "")
    return {"kind": error["kind"], "message": message if isinstance(message, str) else ""}


def _text(key: bytes | None) -> str | None:
    return None if key is None else key.decode("utf-8", "replace")
