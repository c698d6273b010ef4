"""The queue of a source's waiting streams: per class, the most behind first.

The gate (streams.core.admission) decides from counts, so it orders classes (LIVE, then CATCHUP,
then REPLAY) but not the streams within one. This queue does: each waiting stream is entered,
per class, at the end of its oldest waiting window of that class, and a dispatch of a window is
held back while another stream waits with an older window of the same class (`ahead`).

Without it, a window freed by an answer went to whichever stream the coordinator decided next,
before the pump could wake the waiter it belonged to: a stream with tasks in flight is decided
at each of its answers and took every freed slot, and a stream with nothing in flight, woken
only by the pump, was never dispatched again (a chaos run: one stream of a source in paced
recovery starved for the rest of the run while six others caught up). Classes are left to the
gate: a CATCHUP window inside the backfill's floor goes out while LIVE windows wait, by design.

A heap per (source, class) of (end_ms, stream_id), whose entries go stale as streams move on or
stop waiting, and are dropped when they come up: `ahead` costs O(log n) amortized, and nothing
at all for a source with no waiting stream.
"""

from __future__ import annotations

import heapq
from collections.abc import KeysView

Ends = tuple[int | None, int | None, int | None]  # per class, the oldest waiting window's end

_SLACK = 64


class WaitQueue:
    def __init__(self) -> None:
        self._ends: dict[str, dict[str, Ends]] = {}  # source -> stream -> its ends
        self._heaps: dict[tuple[str, int], list[tuple[int, str]]] = {}
        self._counts: dict[str, list[int]] = {}  # source -> streams waiting in each class

    def sources(self) -> KeysView[str]:
        """The sources with a stream in the queue."""
        return self._ends.keys()

    def put(self, source: str, stream_id: str, ends: Ends) -> None:
        """The stream waits with these ends (per class; None: none of that class)."""
        streams = self._ends.get(source)
        if streams is None:
            streams = self._ends[source] = {}
            self._counts[source] = [0, 0, 0]
        old = streams.get(stream_id)
        streams[stream_id] = ends
        counts = self._counts[source]
        for klass, end_ms in enumerate(ends):
            counts[klass] += (end_ms is not None) - (old is not None and old[klass] is not None)
            if end_ms is None or (old is not None and old[klass] == end_ms):
                continue
            heap = self._heaps.get((source, klass))
            if heap is None:
                heap = self._heaps[(source, klass)] = []
            heapq.heappush(heap, (end_ms, stream_id))
            if len(heap) > 2 * len(streams) + _SLACK:  # stale entries: keep within twice
                heap.clear()
                for other, other_ends in streams.items():
                    other_ms = other_ends[klass]
                    if other_ms is not None:
                        heap.append((other_ms, other))
                heapq.heapify(heap)

    def drop(self, source: str, stream_id: str) -> None:
        """The stream no longer waits."""
        streams = self._ends.get(source)
        if streams is None:
            return
        ends = streams.pop(stream_id, None)
        if ends is None:
            return
        if streams:
            counts = self._counts[source]
            for klass, end_ms in enumerate(ends):
                counts[klass] -= end_ms is not None
            return
        del self._ends[source]
        del self._counts[source]
        for klass in (0, 1, 2):
            self._heaps.pop((source, klass), None)

    def counts(self, source: str) -> tuple[int, int, int]:
        """How many streams wait in each class."""
        counts = self._counts.get(source)
        return (0, 0, 0) if counts is None else (counts[0], counts[1], counts[2])

    def ahead(self, source: str, klass: int, end_ms: int, stream_id: str) -> bool:
        """Whether a stream other than `stream_id` waits with a window of `klass` that ended
        before `end_ms`."""
        heap = self._heaps.get((source, klass))
        if not heap:
            return False
        streams = self._ends[source]
        mine: list[tuple[int, str]] = []
        found = False
        while heap:
            entry = heap[0]
            ends = streams.get(entry[1])
            if ends is None or ends[klass] != entry[0]:
                heapq.heappop(heap)  # stale
            elif entry[1] == stream_id:
                mine.append(heapq.heappop(heap))  # its own place: put back below
            else:
                found = entry[0] < end_ms
                break
        for entry in mine:
            heapq.heappush(heap, entry)
        return found

    def best(self, source: str, klass: int, count: int | None) -> list[str]:
        """The `count` streams (None: all) that wait longest behind in `klass`, best first."""
        streams = self._ends.get(source)
        if not streams:
            return []
        ranked = ((e[klass], s) for s, e in streams.items() if e[klass] is not None)
        if count is None:
            return [s for _, s in sorted(ranked)]
        return [s for _, s in heapq.nsmallest(count, ranked)]
