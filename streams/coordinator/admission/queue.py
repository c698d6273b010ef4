"""The queue of a source's waiting streams: per class, first come, first served.

The gate (streams.core.admission) decides from counts, so it orders classes (LIVE, then CATCHUP,
then REPLAY) but not the streams within one. This queue does: each waiting stream has, per class,
a place, `(waiting_since_ms, end_ms)` of its oldest waiting window of that class, and a dispatch
is held back while another stream waits with an earlier place in the same class (`ahead`). A
window asked for the first time takes its place at the back (`waiting_since_ms` = now), so a
stream served joins the back with its next window: round robin over the waiting streams, in the
order they began to wait, the most behind first among those that began together.

Why this order, measured (bench/admission_live_bench.py, a source short of capacity, 100 live
streams beside 50 a day behind): ordered by window end alone (the most behind first), a live
stream that missed its slot once fell into CATCHUP behind a day of backfill and was never
dispatched again (35 of 100 live streams had one task in 20 s). In the order of waiting no
stream waits for more than one turn of the streams waiting before it.

Without the queue, a slot freed by an answer went to whichever stream the coordinator decided
next, before the pump could wake the waiter it was freed for: a stream with tasks in flight is
decided at each of its answers and took every freed slot, and a stream with nothing in flight,
woken only by the pump, starved (a chaos run: one stream of a source in paced recovery never
dispatched again while six others caught up). Classes are left to the gate: a CATCHUP window
inside the backfill's floor goes out while LIVE windows wait, by design.

A heap per (source, class) of (place, stream_id), whose entries go stale as streams move on or
stop waiting, and are dropped when they come up: `ahead` costs O(log n) amortized, and nothing
at all for a source with no waiting stream.
"""

from __future__ import annotations

import heapq
from collections.abc import KeysView

Place = tuple[int, int]  # (waiting_since_ms, end_ms): earlier is served first
Places = tuple[Place | None, Place | None, Place | None]  # per class (None: none waits)

_SLACK = 64


class WaitQueue:
    def __init__(self) -> None:
        self._places: dict[str, dict[str, Places]] = {}  # source -> stream -> its places
        self._heaps: dict[tuple[str, int], list[tuple[Place, str]]] = {}
        self._counts: dict[str, list[int]] = {}  # source -> streams waiting in each class

    def sources(self) -> KeysView[str]:
        """The sources with a stream in the queue."""
        return self._places.keys()

    def put(self, source: str, stream_id: str, places: Places) -> None:
        """The stream waits at these places (per class; None: no window of that class)."""
        streams = self._places.get(source)
        if streams is None:
            streams = self._places[source] = {}
            self._counts[source] = [0, 0, 0]
        old = streams.get(stream_id)
        streams[stream_id] = places
        counts = self._counts[source]
        for klass, place in enumerate(places):
            counts[klass] += (place is not None) - (old is not None and old[klass] is not None)
            if place is None or (old is not None and old[klass] == place):
                continue
            heap = self._heaps.get((source, klass))
            if heap is None:
                heap = self._heaps[(source, klass)] = []
            heapq.heappush(heap, (place, stream_id))
            if len(heap) > 2 * len(streams) + _SLACK:  # stale entries: keep within twice
                heap.clear()
                for other, other_places in streams.items():
                    other_place = other_places[klass]
                    if other_place is not None:
                        heap.append((other_place, other))
                heapq.heapify(heap)

    def drop(self, source: str, stream_id: str) -> None:
        """The stream no longer waits."""
        streams = self._places.get(source)
        if streams is None:
            return
        places = streams.pop(stream_id, None)
        if places is None:
            return
        if streams:
            counts = self._counts[source]
            for klass, place in enumerate(places):
                counts[klass] -= place is not None
            return
        del self._places[source]
        del self._counts[source]
        for klass in (0, 1, 2):
            self._heaps.pop((source, klass), None)

    def counts(self, source: str) -> tuple[int, int, int]:
        """How many streams wait in each class."""
        counts = self._counts.get(source)
        return (0, 0, 0) if counts is None else (counts[0], counts[1], counts[2])

    def ahead(self, source: str, klass: int, place: Place, stream_id: str) -> bool:
        """Whether a stream other than `stream_id` waits in `klass` at a place before `place`."""
        heap = self._heaps.get((source, klass))
        if not heap:
            return False
        streams = self._places[source]
        mine: list[tuple[Place, str]] = []
        found = False
        while heap:
            entry = heap[0]
            places = streams.get(entry[1])
            if places is None or places[klass] != entry[0]:
                heapq.heappop(heap)  # stale
            elif entry[1] == stream_id:
                mine.append(heapq.heappop(heap))  # its own place: put back below
            else:
                found = entry[0] < place
                break
        for entry in mine:
            heapq.heappush(heap, entry)
        return found

    def best(self, source: str, klass: int, count: int | None) -> list[str]:
        """The first `count` streams (None: all) in `klass`, in the queue's order."""
        streams = self._places.get(source)
        if not streams:
            return []
        ranked = ((p[klass], s) for s, p in streams.items() if p[klass] is not None)
        if count is None:
            return [s for _, s in sorted(ranked)]
        return [s for _, s in heapq.nsmallest(count, ranked)]
