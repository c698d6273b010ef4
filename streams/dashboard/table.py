"""The streams table behind `/api/streams`: one row per stream, kept in sorted orders.

The refresher applies only the streams that changed since its last refresh (the read model's
`changes()`, copy-on-change), and each order is a sorted list (sortedcontainers) that a change
moves a row in at O(log n), so a request never sorts. What a request costs, at n streams:

| request                         | cost                                                         |
|---------------------------------|--------------------------------------------------------------|
| a page, any sort, no search     | O(log n + limit)                                             |
| the counts per state            | O(log n): live and catching up are told apart by one bisect  |
| a search `q`                    | O(n) substring scan once per q and set of stream ids (cached)|
|                                 | then O(log n + limit) by stream id; by another field the     |
|                                 | cheaper of a filtered walk, O((offset + limit) * n / m), and |
|                                 | sorting the m matches, O(m log m); a q that every id         |
|                                 | contains costs what no q does                                |
| a refresh that changed c rows   | O(c log n), the lock held per 1,000; past n / 4, one         |
|                                 | O(n log n) rebuild beside the old orders, then swapped in    |

Every order is one sequence; `desc` is exactly its reverse, except that rows without a value
(no window, no error) come last either way. `lag_ms` is `downstream_ms`'s order reversed.
`state` goes retrying, catching up, paused, live, finished; within live and catching up by the
time the stream falls (or fell) behind, soonest first, within the others by stream id. Live and
catching up depend on the time of the request, not of the refresh: a stream is catching up once
`now_ms` passes `downstream_ms + 2 * window_ms + delay_ms` (streams.core.view.status_at).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from streams.dashboard.orders import (
    LAZY_KEYS,
    IdOrder,
    KeyOrder,
    Order,
    StateOrder,
    page_of,
    walk,
)
from streams.readview import ReadView

SORT_FIELDS = (
    "stream_id",
    "downstream_ms",
    "lag_ms",
    "state",
    "window",
    "attempt",
    "bypasses",
    "last_error",
)
REBUILD_SHARE = 4  # a refresh that changes at least 1/4 of the rows rebuilds the orders
APPLY_CHUNK = 1000  # changes applied per hold of the lock
SEARCH_CACHE_IDS = 2_000_000  # matching ids the cached searches hold at most, all together


@dataclass(frozen=True)
class Page:
    rows: list[ReadView]
    matching: int  # the rows the search matched (every row without one)


class StreamTable:
    """Every stream's row and its sorted orders; thread-safe for one writer and many readers.

    The orders by stream id, by downstream (and so lag) and by state are always kept (the
    counts need the last); the others are built on their first request, then kept too.
    """

    def __init__(self, rows: Iterable[ReadView] = ()) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, ReadView] = {row.stream_id: row for row in rows}
        self._orders: dict[str, Order] = self._build(["stream_id", "downstream_ms", "state"])
        # Searches by q, kept until the set of stream ids changes (oldest out first).
        self._searches: OrderedDict[str, _Search] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rows)

    def _build(self, names: Iterable[str]) -> dict[str, Order]:
        rows = self._rows.values()
        orders: dict[str, Order] = {}
        for name in names:
            if name == "stream_id":
                orders[name] = IdOrder(rows)
            elif name == "state":
                orders[name] = StateOrder(rows)
            elif name == "downstream_ms":
                orders[name] = KeyOrder(lambda row: row.downstream_ms, rows)
            else:
                orders[name] = KeyOrder(LAZY_KEYS[name], rows)
        return orders

    def apply(self, changed: Iterable[ReadView], removed: Iterable[str] = ()) -> None:
        """Put the changed rows in (new or replacing) and take the removed ones out.

        Only the refresher calls it. The lock is held per `APPLY_CHUNK` changes (each row
        moves in each order whose key it changed: tens of µs), so a request waits for one chunk
        at most; a large change is applied to a copy, outside the lock.
        """
        changes: dict[str, ReadView | None] = {row.stream_id: row for row in changed}
        for stream_id in removed:
            changes[stream_id] = None
        changes = {k: v for k, v in changes.items() if self._rows.get(k) != v}
        if not changes:
            return
        if len(changes) * REBUILD_SHARE >= len(self._rows):
            self._rebuild(changes)
            return
        items = list(changes.items())
        for start in range(0, len(items), APPLY_CHUNK):  # requests go between the chunks
            with self._lock:
                self._apply(items[start : start + APPLY_CHUNK])

    def _apply(self, changes: list[tuple[str, ReadView | None]]) -> None:
        ids_changed = False
        for stream_id, row in changes:
            old = self._rows.pop(stream_id, None)
            ids_changed |= old is None or row is None
            for order in self._orders.values():
                if old is not None and (row is None or not order.same(old, row)):
                    order.remove(old)
                if row is not None and (old is None or not order.same(old, row)):
                    order.add(row)
            if row is not None:
                self._rows[stream_id] = row
        if ids_changed:
            self._searches.clear()

    def _rebuild(self, changes: dict[str, ReadView | None]) -> None:
        fresh = StreamTable.__new__(StreamTable)
        fresh._rows = dict(self._rows)
        for stream_id, row in changes.items():
            if row is None:
                fresh._rows.pop(stream_id, None)
            else:
                fresh._rows[stream_id] = row
        orders = fresh._build(list(self._orders))  # an order first asked for meanwhile is
        # left out, and built again at its next request
        with self._lock:
            self._rows, self._orders = fresh._rows, orders
            self._searches.clear()

    def pipelines(self) -> dict[str, str]:
        """Each stream's pipeline (O(streams): the status page asks every few seconds)."""
        with self._lock:
            return {stream_id: row.pipeline for stream_id, row in self._rows.items()}

    def counts(self, now_ms: int) -> dict[str, int]:
        """Streams per state at `now_ms`, over every row."""
        with self._lock:
            order = self._orders["state"]
            assert isinstance(order, StateOrder)
            return order.counts(now_ms)

    def page(
        self,
        now_ms: int,
        sort: str = "lag_ms",
        descending: bool = True,
        offset: int = 0,
        limit: int = 50,
        q: str = "",
    ) -> Page:
        """Rows [offset, offset + limit) of those whose stream id contains `q`, in the order."""
        if sort == "lag_ms":  # lag grows as downstream falls behind: the same order reversed
            sort, descending = "downstream_ms", not descending
        if sort not in self._orders:
            self._add_order(sort)
        with self._lock:
            order = self._orders[sort]
            if not q:
                ids = page_of(order.segments(now_ms, descending), offset, offset + limit)
                return Page([self._rows[i] for i in ids], len(self._rows))
            search = self._search(q)
            matches, total = search.ids, len(self._rows)
            if len(matches) == total:  # q matched every stream: as without one
                ids = page_of(order.segments(now_ms, descending), offset, offset + limit)
            elif sort == "stream_id":
                start, stop = offset, offset + limit
                if descending:
                    start, stop = max(len(matches) - stop, 0), max(len(matches) - start, 0)
                ids = matches[start:stop][::-1] if descending else matches[start:stop]
            elif _walk_is_cheaper(offset + limit, len(matches), total):
                wanted = search.members()
                found = (i for i in walk(order.segments(now_ms, descending)) if i in wanted)
                ids = _take(found, offset, limit)
            else:
                rows = [self._rows[i] for i in matches]
                ids = order.subset(rows, now_ms, descending)[offset : offset + limit]
            return Page([self._rows[i] for i in ids], len(matches))

    def _add_order(self, name: str) -> None:
        """Build an order on its first request: O(n log n) once, under the lock."""
        with self._lock:
            if name not in self._orders:
                self._orders.update(self._build([name]))

    def _search(self, q: str) -> _Search:
        """The stream ids containing `q`, by stream id (held under the lock)."""
        found = self._searches.get(q)
        if found is not None:
            self._searches.move_to_end(q)
            return found
        order = self._orders["stream_id"]
        assert isinstance(order, IdOrder)
        found = _Search([stream_id for stream_id in order.items if q in stream_id])
        self._searches[q] = found
        held = sum(len(s.ids) for s in self._searches.values())
        while held > SEARCH_CACHE_IDS and len(self._searches) > 1:
            held -= len(self._searches.popitem(last=False)[1].ids)
        return found


class _Search:
    """A search's matching ids, by stream id, and (made on first use) as a set."""

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids
        self._members: set[str] | None = None

    def members(self) -> set[str]:
        if self._members is None:
            self._members = set(self.ids)
        return self._members


def _walk_is_cheaper(wanted: int, matching: int, total: int) -> bool:
    """Walking the whole order for `wanted` of `matching` rows among `total` visits about
    wanted * total / matching of them; sorting the matches costs matching * log2(matching)."""
    return wanted * total <= matching * matching * max(matching, 2).bit_length()


def _take(ids: Iterator[str], offset: int, limit: int) -> list[str]:
    found: list[str] = []
    for n, stream_id in enumerate(ids):
        if n >= offset:
            found.append(stream_id)
            if len(found) == limit:
                break
    return found
