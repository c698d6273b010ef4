"""The sorted orders of the status page's table, each kept as rows change (sortedcontainers).

An order is read as a list of segments (slices of sorted lists, forwards or backwards), so a
page at any offset costs O(log n + limit) and never a sort. See streams.dashboard.table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from sortedcontainers import SortedList

from streams.readview import STATES, ReadView

STATE_RANK = {"retrying": 0, "catching up": 1, "paused": 2, "live": 3, "finished": 4}


@dataclass(frozen=True, slots=True)
class Segment:
    """Positions [lo, hi) of a sorted list, read forwards or backwards; `keyed` items are
    (key, stream_id) tuples, the others stream ids."""

    items: SortedList
    lo: int
    hi: int
    reverse: bool = False
    keyed: bool = False

    def ids(self, start: int, stop: int) -> Iterator[str]:
        """The stream ids at positions [start, stop) of this segment, in its direction."""
        if self.reverse:
            found = self.items.islice(self.hi - stop, self.hi - start, reverse=True)
        else:
            found = self.items.islice(self.lo + start, self.lo + stop)
        return (item[1] for item in found) if self.keyed else iter(found)


def page_of(segments: list[Segment], start: int, stop: int) -> list[str]:
    """Positions [start, stop) of the sequence the segments make, one after the other."""
    found: list[str] = []
    for segment in segments:
        size = segment.hi - segment.lo
        if start < size and stop > 0:
            found.extend(segment.ids(max(start, 0), min(stop, size)))
        start, stop = start - size, stop - size
        if stop <= 0:
            break
    return found


def walk(segments: list[Segment]) -> Iterator[str]:
    for segment in segments:
        yield from segment.ids(0, segment.hi - segment.lo)


class IdOrder:
    """By stream id."""

    def __init__(self, rows: Iterable[ReadView]) -> None:
        self.items = SortedList(row.stream_id for row in rows)

    def add(self, row: ReadView) -> None:
        self.items.add(row.stream_id)

    def remove(self, row: ReadView) -> None:
        self.items.remove(row.stream_id)

    def same(self, old: ReadView, new: ReadView) -> bool:
        return True

    def segments(self, now_ms: int, descending: bool) -> list[Segment]:
        return [Segment(self.items, 0, len(self.items), descending)]

    def subset(self, rows: list[ReadView], now_ms: int, descending: bool) -> list[str]:
        ids = sorted(row.stream_id for row in rows)
        return ids[::-1] if descending else ids


class KeyOrder:
    """By `key(row)`, then stream id; rows whose key is None apart, by stream id, last."""

    def __init__(self, key: Callable[[ReadView], Any], rows: Iterable[ReadView]) -> None:
        self.key = key
        keyed, nulls = [], []
        for row in rows:
            value = key(row)
            if value is None:
                nulls.append(row.stream_id)
            else:
                keyed.append((value, row.stream_id))
        self.items, self.nulls = SortedList(keyed), SortedList(nulls)

    def add(self, row: ReadView) -> None:
        value = self.key(row)
        if value is None:
            self.nulls.add(row.stream_id)
        else:
            self.items.add((value, row.stream_id))

    def remove(self, row: ReadView) -> None:
        value = self.key(row)
        if value is None:
            self.nulls.remove(row.stream_id)
        else:
            self.items.remove((value, row.stream_id))

    def same(self, old: ReadView, new: ReadView) -> bool:
        return bool(self.key(old) == self.key(new))

    def segments(self, now_ms: int, descending: bool) -> list[Segment]:
        return [
            Segment(self.items, 0, len(self.items), descending, keyed=True),
            Segment(self.nulls, 0, len(self.nulls)),
        ]

    def subset(self, rows: list[ReadView], now_ms: int, descending: bool) -> list[str]:
        key = self.key
        keyed = sorted((value, row.stream_id) for row in rows if (value := key(row)) is not None)
        nulls = sorted(row.stream_id for row in rows if key(row) is None)
        ids = [stream_id for _, stream_id in keyed]
        return [*(ids[::-1] if descending else ids), *nulls]


class StateOrder:
    """By state at the request's time (see the module's docstring); also the counts."""

    def __init__(self, rows: Iterable[ReadView]) -> None:
        fixed: dict[str, list[str]] = {}
        timed = []
        for row in rows:
            if row.fixed_state is None:
                timed.append((row.behind_after_ms, row.stream_id))
            else:
                fixed.setdefault(row.fixed_state, []).append(row.stream_id)
        self.timed = SortedList(timed)  # live or catching up, by when they fall behind
        self.fixed = {state: SortedList(ids) for state, ids in fixed.items()}

    def add(self, row: ReadView) -> None:
        if row.fixed_state is None:
            self.timed.add((row.behind_after_ms, row.stream_id))
        else:
            self.fixed.setdefault(row.fixed_state, SortedList()).add(row.stream_id)

    def remove(self, row: ReadView) -> None:
        if row.fixed_state is None:
            self.timed.remove((row.behind_after_ms, row.stream_id))
        else:
            self.fixed[row.fixed_state].remove(row.stream_id)

    def same(self, old: ReadView, new: ReadView) -> bool:
        return old.fixed_state == new.fixed_state and old.behind_after_ms == new.behind_after_ms

    def behind(self, now_ms: int) -> int:
        """How many of the timed rows are catching up at `now_ms` (the first ones)."""
        return int(self.timed.bisect_left((now_ms,)))

    def counts(self, now_ms: int) -> dict[str, int]:
        counts = dict.fromkeys(STATES, 0)
        for state, ids in self.fixed.items():
            counts[state] = counts.get(state, 0) + len(ids)
        behind = self.behind(now_ms)
        counts["catching up"] += behind
        counts["live"] += len(self.timed) - behind
        return counts

    def segments(self, now_ms: int, descending: bool) -> list[Segment]:
        behind, timed = self.behind(now_ms), self.timed
        groups: dict[str, list[Segment]] = {
            "catching up": [Segment(timed, 0, behind, keyed=True)],
            "live": [Segment(timed, behind, len(timed), keyed=True)],
        }
        for state, ids in self.fixed.items():
            groups.setdefault(state, []).append(Segment(ids, 0, len(ids)))
        ordered = [s for state in sorted(groups, key=_rank) for s in groups[state]]
        if not descending:
            return ordered
        return [Segment(s.items, s.lo, s.hi, True, s.keyed) for s in reversed(ordered)]

    def subset(self, rows: list[ReadView], now_ms: int, descending: bool) -> list[str]:
        def key(row: ReadView) -> tuple[Any, ...]:
            state = row.state(now_ms)
            if row.fixed_state is None:
                return (*_rank(state), 0, row.behind_after_ms, row.stream_id)
            return (*_rank(state), 1, 0, row.stream_id)

        ids = [row.stream_id for row in sorted(rows, key=key)]
        return ids[::-1] if descending else ids


def _rank(state: str) -> tuple[int, str]:
    return (STATE_RANK.get(state, len(STATE_RANK)), state)


def _error_key(row: ReadView) -> tuple[str, str] | None:
    error = row.last_error
    return None if error is None else (error["kind"], error["message"])


Order = IdOrder | KeyOrder | StateOrder
LAZY_KEYS: dict[str, Callable[[ReadView], Any]] = {
    "window": lambda row: None if row.window is None else row.window[0],
    "attempt": lambda row: row.attempt,
    "bypasses": lambda row: row.bypasses,
    "last_error": _error_key,
}
