"""What the coordinator stores per stream: the core's state plus an outbox of announcements.

The outbox holds what was announced (commits, bypass records) but not yet confirmed delivered
by the producer. Faust flushes its producer only before committing offsets, so after a crash the
table may be ahead of what reached the output topics; the next owner of the partition re-emits
the outbox, which makes every advance of `downstream_ms` announced at least once.

Beside them goes a `Summary`: what rebuilding a partition needs of the stream (when it is due,
its progress, its outage counts, when it is collected), so that a rebuild of a million streams
indexes them without decoding and checking a million states.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from streams.core import (
    Commit,
    CommittedWindow,
    StreamConfig,
    StreamState,
    config_to_dict,
    is_failing,
    next_due_ms,
    state_from_stored,
    state_to_row,
)
from streams.core.codec import committed_from_list, committed_to_list, config_to_stored
from streams.core.outage import hold_started_ms


@dataclass(slots=True)
class Record:
    state: StreamState
    # Windows announced on `commits` whose delivery is not confirmed yet, starting after
    # `outbox_previous_ms`.
    outbox_previous_ms: int
    outbox: list[CommittedWindow] = field(default_factory=list)
    # Bypass records (wire dicts) sent to `bypassed` whose delivery is not confirmed yet.
    pending_bypasses: list[dict[str, Any]] = field(default_factory=list)
    # For the stream's view (streams.core.view): windows bypassed since its creation, and when
    # `downstream_ms` was last announced (None: never).
    bypasses: int = 0
    committed_ms: int | None = None
    # The key (`PublishedView.key`) of the view last published from this record, in memory only:
    # a view goes out when it differs (streams.coordinator.views).
    published: tuple[Any, ...] | None = field(default=None, compare=False, repr=False)
    # Transactional (streams.coordinator.views): when that view went out (in memory only), and
    # whether the state may have changed since without a view published: stored with the
    # summary, so that a new owner publishes the view the old one deferred.
    published_ms: int | None = field(default=None, compare=False, repr=False)
    view_owed: bool = field(default=False, compare=False, repr=False)
    # The config's JSON, whole (for views) and stored (`config_to_stored`), each keyed by the
    # config object it encodes: a config changes only on an upsert, so most encodes reuse them.
    _config_json: tuple[StreamConfig, orjson.Fragment] | None = field(
        default=None, compare=False, repr=False
    )
    _stored_config: tuple[StreamConfig, orjson.Fragment] | None = field(
        default=None, compare=False, repr=False
    )

    @classmethod
    def new(cls, state: StreamState) -> Record:
        return cls(state, state.announced_ms)

    def announce(self, commit: Commit) -> None:
        if not self.outbox:
            self.outbox_previous_ms = commit.previous_ms
        self.outbox.extend(commit.windows)

    def confirm_commits(self, delivered: Iterable[tuple[int, int]]) -> bool:
        """Forget the announced windows that a contiguous run of delivered commits covers.

        `delivered` holds (previous_ms, downstream_ms) of commits the producer confirmed. Only
        the prefix of the outbox they cover without a hole leaves it: a commit whose delivery
        failed keeps its windows, and every later one, until they are delivered again.
        Returns whether anything changed.
        """
        mark = self.outbox_previous_ms
        spans = sorted(delivered)
        moved = True
        while moved:
            moved = False
            for previous_ms, downstream_ms in spans:
                if previous_ms <= mark < downstream_ms:
                    mark = downstream_ms
                    moved = True
        if mark == self.outbox_previous_ms:
            return False
        kept = [w for w in self.outbox if w.end_ms > mark]
        self.outbox = kept
        self.outbox_previous_ms = mark
        return True

    def confirm_bypasses(self, delivered: set[int]) -> bool:
        kept = [b for b in self.pending_bypasses if b["start_ms"] not in delivered]
        changed = len(kept) != len(self.pending_bypasses)
        self.pending_bypasses = kept
        return changed

    def outbox_commit(self, now_ms: int) -> Commit | None:
        """One commit that re-announces everything unconfirmed, or None."""
        if not self.outbox:
            return None
        return Commit(
            self.state.config.stream_id,
            self.outbox[-1].end_ms,
            self.outbox_previous_ms,
            now_ms,
            tuple(self.outbox),
        )

    def config_json(self) -> orjson.Fragment:
        """The config's whole JSON (`config_to_dict`), encoded again only when it changed."""
        cached = self._config_json = _cached(self._config_json, self.state.config, config_to_dict)
        return cached[1]

    def stored_config_json(self) -> orjson.Fragment:
        """The config's stored JSON (`config_to_stored`), encoded again only when it changed."""
        stored = self._stored_config = _cached(
            self._stored_config, self.state.config, config_to_stored
        )
        return stored[1]

    def encode(self, exact: bool = True) -> bytes:
        """The stored bytes. `exact=False` skips trimming orjson's buffer (`_exact`), for bytes
        that only live until the transaction's commit writes them."""
        doc: dict[str, Any] = {"s": state_to_row(self.state, self.stored_config_json())}
        if self.outbox:
            doc["o"] = [
                self.outbox_previous_ms,
                list(map(committed_to_list, self.outbox)),
            ]
        if self.pending_bypasses:
            doc["b"] = self.pending_bypasses
        if self.bypasses:
            doc["n"] = self.bypasses
        if self.committed_ms is not None:
            doc["c"] = self.committed_ms
        # Last, so that `stored_summary` finds it at the end of the bytes and parses it alone.
        doc["x"] = _summary_row(
            self.state, bool(self.outbox or self.pending_bypasses), self.view_owed
        )
        encoded = orjson.dumps(doc)
        return _exact(encoded) if exact else encoded

    @classmethod
    def decode(cls, raw: bytes) -> Record:
        doc = orjson.loads(raw)
        state = state_from_stored(doc["s"])
        previous, windows = doc.get("o", [state.announced_ms, []])
        record = cls(
            state,
            previous,
            [committed_from_list("outbox", w) for w in windows],
            doc.get("b", []),
            _count(doc.get("n", 0)),
            _time(doc.get("c")),
        )
        record.view_owed = _view_owed(doc.get("x"))
        return record


def _cached(
    cached: tuple[StreamConfig, orjson.Fragment] | None,
    config: StreamConfig,
    to_doc: Callable[[StreamConfig], dict[str, Any]],
) -> tuple[StreamConfig, orjson.Fragment]:
    """`cached` while it encodes `config` (the same object), else `config` encoded anew."""
    if cached is not None and cached[0] is config:
        return cached
    return config, orjson.Fragment(_exact(orjson.dumps(to_doc(config))))


def _exact(encoded: bytes) -> bytes:
    """A copy of exactly its length: the bytes orjson.dumps returns keep its whole output
    buffer (tracemalloc counts 4,098 bytes for a 300-byte document), which the record cache
    (100,000 records, each with its config's JSON) and the Faust engine's cached bytes would
    otherwise hold for every record: 0.4 µs an encode."""
    return bytes(memoryview(encoded))


class Summary(NamedTuple):
    """What rebuilding a partition needs to know of a stream, stored with its record (key "x")
    so that a rebuild reads it without decoding and checking the whole state. Each field is the
    core's answer for that state, computed at every encode: the due-index is a cache of
    `next_due_ms`, and this is where a rebuild takes it from."""

    wake_ms: int | None  # next_due_ms(state)
    downstream_ms: int
    in_flight: int  # windows awaiting a result
    unannounced: bool  # committed windows not flushed yet
    collect_at_ms: int | None  # an ended stream's collection (None: it runs)
    bypass_retention_ms: int
    source: str | None
    failing: bool  # streams.core.outage.is_failing
    held: bool  # a window of it is held by the outage guard
    view_owed: bool = False  # Record.view_owed (not derived from the state)


def summary_of(state: StreamState) -> Summary:
    return Summary(*_summary_row(state, False, False)[:9])


def _summary_row(state: StreamState, announcing: bool, view_owed: bool) -> tuple[Any, ...]:
    """What encode stores as the summary, a plain tuple: `summary_of`'s first nine members, then
    whether the record has announcements to send again, then `view_owed`."""
    windows = state.windows
    config = state.config
    return (
        next_due_ms(state),
        state.downstream_ms,
        int(windows[0].in_flight) if len(windows) == 1 else sum(w.in_flight for w in windows),
        bool(state.unannounced),
        state.collect_at_ms(),
        config.bypass_retention_ms,
        config.source,
        is_failing(state),
        hold_started_ms(state) is not None,
        announcing,
        view_owed,
    )


# The summary is the document's last member: `,"x":[...]}`. A quote inside a JSON string is
# always escaped, so the last `,"x":[` in the bytes is that member's, whatever the state holds.
_SUMMARY_AT = b',"x":['


def stored_summary(raw: bytes) -> Summary | None:
    """The summary stored in a record's bytes, parsed alone; None when the record must be
    decoded whole: it has announcements to send again, it predates summaries, or the summary
    is malformed (the whole decode then says what is wrong)."""
    at = raw.rfind(_SUMMARY_AT)
    if at < 0 or not raw.endswith(b"]}"):
        return None
    try:
        x = orjson.loads(raw[at + 5 : -1])
    except orjson.JSONDecodeError:
        return None
    # Ten members before views could be deferred, eleven since (the last: Record.view_owed).
    if type(x) is not list or len(x) not in (10, 11) or x[9] is not False:
        return None
    wake, downstream, in_flight, unannounced, collect_at, retention, source, failing, held = x[:9]
    view_owed = _view_owed(x)
    if not (
        _is_time(wake, True)
        and _is_time(downstream, False)
        and _is_time(in_flight, False)
        and _is_time(collect_at, True)
        and _is_time(retention, False)
        and (source is None or type(source) is str)
        and type(unannounced) is bool
        and type(failing) is bool
        and type(held) is bool
    ):
        return None
    return Summary(wake, downstream, in_flight, unannounced, collect_at, retention, source,
                   failing, held, view_owed)  # fmt: skip


def _view_owed(x: Any) -> bool:
    """Record.view_owed as a stored summary holds it: its eleventh member (a summary of ten
    predates deferred views, and owes none)."""
    return type(x) is list and len(x) == 11 and x[10] is True


def _is_time(value: Any, optional: bool) -> bool:
    return (value is None and optional) or (type(value) is int and value >= 0)


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"bypass count {value!r} is not a count")
    return value


def _time(value: Any) -> int | None:
    if value is not None and (type(value) is not int or value < 0):
        raise ValueError(f"committed_ms {value!r} is not a time")
    return value
