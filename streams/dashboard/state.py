"""The `/api/state` document: read-model views rendered at a given time, as plain JSON data.

Only what the page shows leaves the server: no stream config (its params may hold secrets),
no raw records. Time is an argument, so the document is a pure function of its inputs. The
streams themselves are in a `StreamTable` (streams.dashboard.table), paged by `/api/streams`;
`/api/state` carries the counts over all of them and only the `STATE_STREAMS` largest lags.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from streams.dashboard.table import StreamTable
from streams.outages import SourceOutage
from streams.readview import (
    MAX_MESSAGE_CHARS,
    STATES,
    BypassSource,
    ReadView,
    StreamSource,
    bypass_json,
)

__all__ = [
    "MAX_MESSAGE_CHARS",
    "STATES",
    "BypassLike",
    "ReadModelSource",
    "Snapshot",
    "StreamLike",
    "StreamSource",
]

RECENT_BYPASSES = 50
STATE_STREAMS = 100  # the streams /api/state carries (the largest lags); the page pages them


class StreamLike(StreamSource, Protocol):
    """What the timeline needs of one `streams.readview.ReadView` (streams.dashboard.timeline):
    a table row's fields (streams.readview.StreamSource) and these."""

    @property
    def config(self) -> Mapping[str, Any] | None: ...
    @property
    def held_since_ms(self) -> int | None: ...
    def lag_ms(self, now_ms: int) -> int | None: ...


BypassLike = BypassSource  # what the page needs of `streams.readview.BypassView`


class ReadModelSource(Protocol):
    """The part of `streams.readmodel.ReadModel` the server uses (a fake in unit tests)."""

    caught_up: bool

    def refresh(self, timeout_s: float = 5.0) -> None: ...
    def changes(self) -> tuple[Sequence[StreamSource], Sequence[str]]: ...
    def stream(self, stream_id: str) -> StreamLike | None: ...
    def bypasses(self, limit: int | None = None) -> Sequence[BypassLike]: ...
    def bypasses_of(self, stream_id: str) -> Sequence[BypassLike]: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class Snapshot:
    """What the refresher last read. The table holds the read model's views (each made for it
    when its view changed; streams.readview.ReadView) and is locked while the refresher
    changes it, so requests never see a row mid-update; the rest is replaced whole at each
    refresh."""

    table: StreamTable = field(default_factory=StreamTable)
    bypasses: tuple[BypassLike, ...] = ()
    refreshed_ms: int | None = None
    refresh_error: str | None = None
    outages: tuple[SourceOutage, ...] = ()  # sources in outage (streams.outages): the banner
    caught_up: bool = True  # whether the read model had read every topic to its end
    # Each pipeline as `tidemark pipelines list` shows it (streams.registry.pipeline_doc).
    pipelines: tuple[dict[str, Any], ...] = ()
    # The Sources view's document (streams.dashboard.sources); None: not read (yet).
    sources: dict[str, Any] | None = None

    @classmethod
    def of(
        cls, streams: Iterable[StreamSource], bypasses: Iterable[BypassLike], refreshed_ms: int
    ) -> Snapshot:
        table = StreamTable(ReadView.copy_of(view, refreshed_ms) for view in streams)
        return cls(table, recent_bypasses(bypasses), refreshed_ms)

    @classmethod
    def read(cls, model: ReadModelSource, table: StreamTable, now_ms: int) -> Snapshot:
        """After `model.refresh()`: put what changed since the last read into `table`."""
        changed, removed = model.changes()
        table.apply([ReadView.copy_of(view, now_ms) for view in changed], removed)
        bypasses = recent_bypasses(model.bypasses(RECENT_BYPASSES))
        return cls(table, bypasses, now_ms, caught_up=model.caught_up)


def recent_bypasses(bypasses: Iterable[BypassLike]) -> tuple[BypassLike, ...]:
    recent = sorted(bypasses, key=lambda b: (-b.bypassed_ms, b.stream_id, b.start_ms))
    return tuple(recent[:RECENT_BYPASSES])


def state_document(snapshot: Snapshot, now_ms: int) -> dict[str, Any]:
    """The JSON body of `/api/state`: counts over every stream (`total` of them), the
    `STATE_STREAMS` with the largest lag (first), recent bypasses, sources in outage."""
    table = snapshot.table
    page = table.page(now_ms, "lag_ms", descending=True, limit=STATE_STREAMS)
    return {
        "now_ms": now_ms,
        "refreshed_ms": snapshot.refreshed_ms,
        "refresh_error": snapshot.refresh_error,
        "caught_up": snapshot.caught_up,
        "total": len(table),
        "counts": table.counts(now_ms),
        "streams": [row.to_json(now_ms) for row in page.rows],
        "bypasses": [bypass_json(view) for view in snapshot.bypasses],
        "outages": [{**o.to_json(), "line": o.line(now_ms)} for o in snapshot.outages],
        "pipelines": list(snapshot.pipelines),
    }
