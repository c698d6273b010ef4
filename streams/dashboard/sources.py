"""The status page's Sources view: per source, its limits, health, load and pacing, and its last
hour. Pure: the entries of `{prefix}.health` and `{prefix}.sources` and the time come in (the
topics are read by streams.dashboard.sources_reader), the `/api/sources` document goes out.

A source is listed when its `sources` entry or a fresh `health` entry names it, or while it
still has a history on the page (an hour at most, then it goes). Per source, over the **fresh**
`health` entries (the coordinators' staleness rule, streams.outages.is_fresh):

| field             | what                                                                   |
|-------------------|------------------------------------------------------------------------|
| `limits`          | its `sources` entry (every limit, `updated_ms`), or null: no limits    |
| `failing`/`total` | its streams failing, of its streams, summed over partitions            |
| `in_outage`       | whether that is an outage under the guard's policy (streams.core)      |
| `outage_since_ms` | the earliest an owner has seen it in outage, or null                   |
| `in_flight`       | tasks dispatched and not answered, summed                              |
| `waiting`         | windows waiting for admission, summed                                  |
| `pacing`          | the levels of the owners pacing its recovery, summed; null: none does  |
| `partitions`      | the fresh entries that carry it                                        |
| `history`         | `{"at_ms", "dispatches_per_s", "failing"}`: the last hour's samples as |
|                   | three columns (streams.dashboard.source_history)                       |

An owner publishes its pacing levels in each of its partitions' entries, so each owner's level
is counted once: from its newest fresh entry that carries the source. At most `MAX_SOURCES`
sources are listed, by name; `omitted` says how many more there are.

    /api/sources            the document
    /api/sources?history=0  without the histories (the page asks for them once per sample)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

from streams.core import OutagePolicy, SourceCounts, in_outage
from streams.core.admission import limits_to_dict
from streams.dashboard.source_history import SAMPLE_MS, WINDOW_MS, SourceHistory
from streams.outages import is_fresh
from streams.wire import HealthMessage, SourceEntry

MAX_SOURCES = 100


@dataclass
class _Load:
    """One source's sums over the fresh entries."""

    failing: int = 0
    total: int = 0
    since_ms: int | None = None
    in_flight: int = 0
    waiting: int = 0
    partitions: int = 0


def loads(entries: Iterable[HealthMessage], now_ms: int, stale_ms: int) -> dict[str, _Load]:
    """Per source, its counts summed over the fresh entries."""
    out: dict[str, _Load] = {}
    for entry in entries:
        if not is_fresh(entry, now_ms, stale_ms):
            continue
        for source, counts in entry.sources.items():
            load = out.setdefault(source, _Load())
            load.failing += counts.failing
            load.total += counts.total
            load.in_flight += counts.in_flight
            load.waiting += counts.waiting
            load.partitions += 1
            started = counts.outage_since_ms
            if started is not None and (load.since_ms is None or started < load.since_ms):
                load.since_ms = started
    return out


def pacing_levels(entries: Iterable[HealthMessage], now_ms: int, stale_ms: int) -> dict[str, int]:
    """Per source paced by some owner, the sum over owners of each one's level, read from its
    newest fresh entry that carries the source."""
    newest: dict[tuple[str, str], HealthMessage] = {}  # (owner, source) -> entry
    for entry in entries:
        if not is_fresh(entry, now_ms, stale_ms):
            continue
        for source in entry.sources:
            key = (entry.owner, source)
            if key not in newest or entry.published_ms > newest[key].published_ms:
                newest[key] = entry
    levels: dict[str, int] = {}
    for (_, source), entry in newest.items():
        level = entry.pacing.get(source)
        if level is not None:
            levels[source] = levels.get(source, 0) + level
    return levels


def limits_doc(entry: SourceEntry) -> dict[str, Any]:
    """A source's limits as the view shows them: every field but the name, and `updated_ms`."""
    fields = limits_to_dict(entry.limits)
    del fields["source"]
    return {**fields, "updated_ms": entry.updated_ms}


class SourcesView:
    """The Sources view over successive reads of both topics; it keeps the history."""

    def __init__(
        self,
        policy: OutagePolicy,
        stale_ms: int,
        history: SourceHistory | None = None,
        max_sources: int = MAX_SOURCES,
    ) -> None:
        self.policy = policy
        self.stale_ms = stale_ms
        self.history = history or SourceHistory()
        self.max_sources = max_sources

    def observe(
        self,
        health: Iterable[HealthMessage],
        limits: Iterable[SourceEntry],
        now_ms: int,
    ) -> dict[str, Any]:
        """One refresh: every `health` and `sources` entry read, and the document then."""
        entries = list(health)
        by_source = {entry.limits.source: entry for entry in limits}
        load = loads(entries, now_ms, self.stale_ms)
        paced = pacing_levels(entries, now_ms, self.stale_ms)
        present = set(by_source) | set(load)
        named = sorted(present | set(self.history.sources()))
        shown = named[: self.max_sources]
        failing = {source: counts.failing for source, counts in load.items()}
        self.history.observe(entries, failing, now_ms, present.intersection(shown), shown)
        rows = []
        for source in shown:
            samples = self.history.samples(source)
            if source not in present and not samples:  # its last hour just ran out
                continue
            counts = load.get(source, _Load())
            limit = by_source.get(source)
            rows.append(
                {
                    "source": source,
                    "limits": None if limit is None else limits_doc(limit),
                    "failing": counts.failing,
                    "total": counts.total,
                    "in_outage": in_outage(SourceCounts(counts.failing, counts.total), self.policy),
                    "outage_since_ms": counts.since_ms,
                    "in_flight": counts.in_flight,
                    "waiting": counts.waiting,
                    "pacing": paced.get(source),
                    "partitions": counts.partitions,
                    "history": {
                        "at_ms": [s.at_ms for s in samples],
                        "dispatches_per_s": [s.dispatches_per_s for s in samples],
                        "failing": [s.failing for s in samples],
                    },
                }
            )
        return {
            "read_ms": now_ms,
            "sampled_ms": self.history.sampled_ms,
            "sample_ms": self.history.sample_ms,
            "window_ms": self.history.window_ms,
            "stale_ms": self.stale_ms,
            "omitted": len(named) - len(shown),  # those past the bound
            "sources": rows,
        }


def empty_document() -> dict[str, Any]:
    """The document before the topics were read (or without a reader)."""
    return {
        "read_ms": None,
        "sampled_ms": None,
        "sample_ms": SAMPLE_MS,
        "window_ms": WINDOW_MS,
        "stale_ms": None,
        "omitted": 0,
        "sources": [],
    }


def sources_response(
    doc: dict[str, Any] | None, query: str, now_ms: int
) -> tuple[HTTPStatus, dict[str, Any]]:
    """The status and body of `/api/sources?{query}`: the last document read, at `now_ms`;
    `history=0` leaves the histories out. Any other parameter is a 400 naming it."""
    history = True
    if query:
        try:
            values = parse_qs(query, keep_blank_values=True, strict_parsing=True, max_num_fields=4)
        except ValueError:
            return _bad("query", "is not a valid query string")
        for name, given in values.items():
            if name != "history":
                return _bad(name, "is not a parameter (the one is history)")
            if len(given) > 1 or given[0] not in ("0", "1"):
                return _bad(name, "must be 0 or 1, once")
            history = given[0] == "1"
    body = {"now_ms": now_ms, **(doc or empty_document())}
    if not history:
        rows = body["sources"]
        body["sources"] = [{k: v for k, v in row.items() if k != "history"} for row in rows]
    return HTTPStatus.OK, body


def _bad(parameter: str, reason: str) -> tuple[HTTPStatus, dict[str, Any]]:
    return HTTPStatus.BAD_REQUEST, {
        "error": f"bad parameter {parameter}: {reason}",
        "parameter": parameter,
        "reason": reason,
    }
