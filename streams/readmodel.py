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
| bypassed | the listed windows by their key's stream and window; a None value unlists     |

Every value is decoded by `streams.wire`; invalid ones are ignored, like the coordinator
rejects them (a control's key must be its stream id, a bypassed key its window's). A stream is
shown once an upsert, task, commit or bypass names it; pause and nack alone do not make one.
"""

from __future__ import annotations

import copy
import shlex
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from streams.coordinator.topics import Topics
from streams.core import (
    NACK_WITHOUT_ERROR,
    Commit,
    Control,
    Pause,
    Replay,
    Result,
    Resume,
    Task,
    Upsert,
    config_to_dict,
)
from streams.errors import BrokerUnavailable, InvalidInput
from streams.humanize import format_time
from streams.kafka.settings import KafkaSettings
from streams.kafka.topic_io import TopicReader, TopicRecord
from streams.wire import (
    Bypassed,
    decode_bypassed,
    decode_commit,
    decode_control,
    decode_result,
    decode_task,
    stream_key,
)

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
class _StreamEntry:
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
        self._entries: dict[str, _StreamEntry] = {}
        self._bypassed: dict[tuple[str, int], BypassView] = {}  # by (stream_id, start_ms)
        self._bypass_counts: Counter[str] = Counter()
        self._reader = TopicReader(settings, self._short, "tidemark-readmodel")
        self.caught_up = False  # whether the last refresh reached every high watermark

    # -- applying records (pure) ---------------------------------------------------------------

    def apply(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        """Apply one record of `topic` (a short name like "commits"); invalid ones are ignored."""
        with self._lock:
            self._apply(topic, key, value)

    def _apply(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        try:
            if topic == "control":
                self._on_control(key, decode_control(value))
            elif topic == "tasks":
                self._on_task(decode_task(value))
            elif topic == "results":
                self._on_result(decode_result(value))
            elif topic == "commits":
                self._on_commit(decode_commit(value))
            elif topic == "bypassed":
                self._on_bypass(decode_bypassed(key, value))
        except InvalidInput:
            return  # what the coordinator rejects (or never writes) changes no view

    def _live_entry(self, stream_id: str) -> _StreamEntry | None:
        """The stream's entry, or None while it is deleted: what the old stream emitted
        between its delete and the coordinator applying it must not reach a re-creation."""
        entry = self._entry(stream_id)
        return None if entry.deleted else entry

    def _entry(self, stream_id: str) -> _StreamEntry:
        entry = self._entries.get(stream_id)
        if entry is None:
            entry = self._entries[stream_id] = _StreamEntry(StreamView(stream_id))
        return entry

    def _on_control(self, key: bytes | None, control: Control | Replay) -> None:
        if isinstance(control, Replay):
            return
        stream_id = control.config.stream_id if isinstance(control, Upsert) else control.stream_id
        if key != stream_key(stream_id):
            return  # the coordinator rejects a key that is not the stream id
        if isinstance(control, Upsert):
            entry = self._entry(stream_id)
            entry.view.config = config_to_dict(control.config)
            entry.shown, entry.deleted = True, False
        elif isinstance(control, (Pause, Resume)):
            known = self._entries.get(stream_id)
            if known is not None and not known.deleted:  # else the coordinator rejects it
                known.view.paused = isinstance(control, Pause)
        elif stream_id in self._entries:  # a delete
            entry = self._entries[stream_id]
            entry.deleted = True
            entry.reset()

    def _on_task(self, task: Task) -> None:
        if task.replay:
            return
        entry = self._live_entry(task.stream_id)
        if entry is None:
            return
        entry.shown = True
        entry.view.window = (task.start_ms, task.end_ms)
        entry.view.attempt = task.attempt

    def _on_result(self, result: Result) -> None:
        if result.outcome != "nack":
            return
        entry = self._live_entry(result.stream_id)
        if entry is None:
            return
        downstream_ms = entry.view.downstream_ms
        if downstream_ms is not None and result.start_ms < downstream_ms:
            return  # a window already committed (or a replay of a bypassed one)
        error = result.error or NACK_WITHOUT_ERROR
        entry.view.last_error = error.to_wire()
        entry.error_start_ms = result.start_ms

    def _on_commit(self, commit: Commit) -> None:
        entry = self._live_entry(commit.stream_id)
        if entry is None:
            return
        entry.shown = True
        view = entry.view
        view.downstream_ms = max(commit.downstream_ms, view.downstream_ms or 0)
        view.last_commit_ms = max(commit.committed_ms, view.last_commit_ms or 0)
        if view.last_error is not None and entry.error_start_ms < view.downstream_ms:
            view.last_error = None

    def _on_bypass(self, bypassed: Bypassed) -> None:
        key = (bypassed.stream_id, bypassed.start_ms)
        self._unlist(key)
        bypass = bypassed.record
        if bypass is None:
            return
        error = bypass.last_error
        self._bypassed[key] = BypassView(
            bypass.stream_id,
            bypass.start_ms,
            bypass.end_ms,
            bypass.attempts,
            bypass.first_failed_ms,
            bypass.bypassed_ms,
            None if error is None else error.to_wire(),
        )
        self._bypass_counts[bypass.stream_id] += 1
        self._entry(bypass.stream_id).shown = True

    def _unlist(self, key: tuple[str, int]) -> None:
        old = self._bypassed.pop(key, None)
        if old is not None:
            self._bypass_counts[old.stream_id] -= 1

    # -- reading views -------------------------------------------------------------------------

    def streams(self) -> list[StreamView]:
        """Every stream shown and not deleted, by stream_id (copies, safe to keep)."""
        with self._lock:
            return [
                self._view(entry)
                for _, entry in sorted(self._entries.items())
                if entry.shown and not entry.deleted
            ]

    def stream(self, stream_id: str) -> StreamView | None:
        """One stream, or None if it is unknown or deleted."""
        with self._lock:
            entry = self._entries.get(stream_id)
            if entry is None or not entry.shown or entry.deleted:
                return None
            return self._view(entry)

    def bypasses(self, limit: int | None = None) -> list[BypassView]:
        """Listed windows, the most recently bypassed first."""
        with self._lock:
            views = list(self._bypassed.values())
        views.sort(key=lambda b: (-b.bypassed_ms, b.stream_id, b.start_ms))
        return views if limit is None else views[:limit]

    def _view(self, entry: _StreamEntry) -> StreamView:
        view = copy.copy(entry.view)
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
        records: list[TopicRecord] = []
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
