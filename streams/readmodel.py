"""The cluster as its compacted topics tell it: every stream's view and the bypassed windows.

Built from two compacted topics alone, read from the beginning: `streams`, where whichever
coordinator owns a stream publishes its current view (streams.core.view) whenever it changes,
and `bypassed`. So it shows the whole cluster whatever coordinator owns what, and its start
costs O(streams + listed windows), not O(history) (`tasks`, `results` and `commits` are never
read). Both topics are read `read_committed`: the `confluent` engine writes a view in the
transaction of the change it shows.

| topic    | what it changes                                                              |
|----------|------------------------------------------------------------------------------|
| streams  | a view replaces the stream's; a tombstone (a delete) removes it, and a       |
|          | re-created stream's first view (a new incarnation) starts it afresh          |
| bypassed | the listed windows by their key's stream and window; a None value unlists   |
| pipelines| (asked for by name) the registry's entries by key; a tombstone removes one   |

Each topic is keyed by stream (a window's key starts with its stream), so a key's records come
in the order they were written and every rule is per key: the topics may be read side by side.
Every value is decoded by `streams.wire`; invalid ones are ignored.
"""

from __future__ import annotations

import heapq
import threading
from collections import Counter
from collections.abc import Iterable

from streams.core import eta
from streams.core.view import PublishedView, behind_ms
from streams.errors import BrokerUnavailable, InvalidInput
from streams.kafka.settings import KafkaSettings
from streams.kafka.topic_io import TopicReader, TopicRecord
from streams.readview import BypassView, ReadView
from streams.topics import Topics
from streams.wire import Bypassed, PipelineMessage, decode_bypassed, decode_pipeline, decode_view

TOPICS = ("streams", "bypassed")

__all__ = ["TOPICS", "BypassView", "ReadModel", "ReadView"]


def _recent_first(bypass: BypassView) -> tuple[int, str, int]:
    return (-bypass.bypassed_ms, bypass.stream_id, bypass.start_ms)


class ReadModel:
    """The read model over one cluster's topics `{prefix}.*`; thread-safe for one refresher.

    `topics` narrows what `refresh` reads (the CLI only needs `streams` to update a stream).
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
        # The decoded views (frozen): a reader's ReadView is made from one when it asks.
        self._views: dict[str, PublishedView] = {}
        # The pace of each stream that was behind at its latest view (streams.core.eta): the
        # catch-up estimate; a stream that is live at its view has none (memory: the behind).
        self._paces: dict[str, eta.Pace] = {}
        self._bypassed: dict[tuple[str, int], BypassView] = {}  # by (stream_id, start_ms)
        self._bypass_counts: Counter[str] = Counter()
        self._pipelines: dict[bytes, PipelineMessage] = {}  # the registry's entries, by key
        self._reader = TopicReader(settings, self._short, "tidemark-readmodel")
        # The streams changed since the last changes(); None until someone asks (the CLI never).
        self._changed: set[str] | None = None
        self.caught_up = False  # whether the last refresh reached every high watermark
        self.records_read = 0  # every record applied so far, valid or not

    # -- applying records (pure) ---------------------------------------------------------------

    def apply(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        """Apply one record of `topic` (a short name like "streams"); invalid ones are ignored."""
        with self._lock:
            self._apply(topic, key, value)

    def _apply(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        try:
            if topic == "streams":
                stream_id, view = decode_view(key, value)
                if self._changed is not None:
                    self._changed.add(stream_id)
                if view is None:
                    self._views.pop(stream_id, None)
                    self._paces.pop(stream_id, None)
                else:
                    self._views[stream_id] = view
                    self._pace(view)
            elif topic == "bypassed":
                self._on_bypass(decode_bypassed(key, value))
            elif topic == "pipelines" and key is not None:
                entry = decode_pipeline(key, value)
                if entry is None:
                    self._pipelines.pop(key, None)
                else:
                    self._pipelines[key] = entry
        except InvalidInput:
            return  # what the coordinator never writes changes no view

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
        if self._changed is not None:
            self._changed.add(bypass.stream_id)

    def _unlist(self, key: tuple[str, int]) -> None:
        old = self._bypassed.pop(key, None)
        if old is not None:
            self._bypass_counts[old.stream_id] -= 1
            if self._changed is not None:
                self._changed.add(old.stream_id)

    # -- reading views -------------------------------------------------------------------------

    def streams(self) -> list[ReadView]:
        """Every stream, by stream_id (copies, safe to keep)."""
        with self._lock:
            return [self._view(view) for _, view in sorted(self._views.items())]

    def changes(self) -> tuple[list[ReadView], list[str]]:
        """The streams whose view (or listed bypasses) changed since the last call, and the
        stream ids removed meanwhile; the first call returns every stream.

        For a reader that keeps its own copy of every stream (the status page): O(changes),
        not O(streams), per call, and no config copied (a ReadView makes its config a dict
        only when asked). The model tracks changes only once this was first called.
        """
        with self._lock:
            ids = self._views.keys() if self._changed is None else self._changed
            changed, removed = [], []
            counts, views = self._bypass_counts, self._views
            for stream_id in ids:
                view = views.get(stream_id)
                if view is None:
                    removed.append(stream_id)
                else:
                    changed.append(
                        self._with_rate(ReadView.of(view, counts[stream_id], config=False))
                    )
            self._changed = set()
            return changed, removed

    def stream(self, stream_id: str) -> ReadView | None:
        """One stream, or None if it is unknown or deleted."""
        with self._lock:
            view = self._views.get(stream_id)
            return None if view is None else self._view(view)

    def bypasses(self, limit: int | None = None) -> list[BypassView]:
        """Listed windows, the most recently bypassed first (the first `limit` of them:
        O(listed * log limit), as the status page asks each second)."""
        with self._lock:
            views = list(self._bypassed.values())
        if limit is not None:
            return heapq.nsmallest(limit, views, key=_recent_first)
        views.sort(key=_recent_first)
        return views

    def bypasses_of(self, stream_id: str) -> list[BypassView]:
        """One stream's listed windows, by start (a scan of every listed window: for one
        stream on demand, as the status page's timeline asks, not for every stream)."""
        with self._lock:
            if not self._bypass_counts[stream_id]:
                return []
            views = [b for b in self._bypassed.values() if b.stream_id == stream_id]
        return sorted(views, key=lambda b: b.start_ms)

    def pipeline_entries(self) -> list[PipelineMessage]:
        """The registry's entries (streams.registry decides which are live), if `pipelines`
        was read."""
        with self._lock:
            return list(self._pipelines.values())

    def _view(self, view: PublishedView) -> ReadView:
        fresh = ReadView.of(view, self._bypass_counts[view.stream_id])  # fresh: safe to change
        return self._with_rate(fresh)

    def _with_rate(self, view: ReadView) -> ReadView:
        pace = self._paces.get(view.stream_id)
        if pace is not None:
            view.catch_up_rate = eta.rate(pace)
        return view

    def _pace(self, view: PublishedView) -> None:
        """Keep the stream's pace while it is behind at its view (a paused or finished one,
        or one live at its view, needs no estimate)."""
        config, stream_id = view.config, view.stream_id
        lag_ms = view.changed_ms - view.downstream_ms
        if view.status in ("paused", "finished") or lag_ms <= behind_ms(
            config.window_ms, config.delay_ms
        ):
            self._paces.pop(stream_id, None)
            return
        pace = self._paces.get(stream_id)
        self._paces[stream_id] = eta.observe(pace, view.changed_ms, view.downstream_ms)

    # -- reading the topics --------------------------------------------------------------------

    def refresh(self, timeout_s: float = 5.0) -> None:
        """Read every topic from where the last call stopped up to its high watermark now.

        The first call starts at the beginning. Returns after `timeout_s` even if some
        partitions are still behind (`caught_up` says which happened; the next call goes on).
        Raises BrokerUnavailable if the cluster does not answer within `timeout_s`.
        """
        try:
            self.caught_up = self._reader.read(timeout_s, self._apply_batch)
        except BrokerUnavailable as exc:
            where = f"{self.topics.prefix}.* at {self.settings.bootstrap_servers}"
            raise BrokerUnavailable(f"could not read the topics {where}: {exc}") from exc

    def _apply_batch(self, records: list[TopicRecord]) -> None:
        """Records as read: each key's in the order written (which is all the rules need)."""
        short = self._short
        with self._lock:
            self.records_read += len(records)
            for record in records:
                self._apply(short[record.topic], record.key, record.value)

    def read_all(self, quiet_s: float) -> None:
        """Refresh until caught up, for as long as every `quiet_s` brings records: a large
        cluster takes as long as it takes, a stuck read gives up after `quiet_s` (then
        `caught_up` is False)."""
        before = -1
        while before != self.records_read:
            before = self.records_read
            self.refresh(quiet_s)
            if self.caught_up:
                return

    def close(self) -> None:
        """Release the Kafka clients; the views stay readable."""
        self._reader.close()
