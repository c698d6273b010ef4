"""The in-memory due-index: which streams of a partition need the clock, and when.

A tick for a partition then costs O(due streams), not a scan of the table. The index is only a
cache of `next_due_ms` over the table; it is rebuilt from the table when a partition is assigned.
"""

from __future__ import annotations

import heapq

_SLACK = 1024


class DueIndex:
    """Per partition, a heap of (wake_ms, stream_id) entries, at most one live per stream.

    A stream's wake moving later (a new deadline on every dispatch, the usual case) pushes
    nothing: its entry stays at the earlier time and, when it comes up, is pushed again at the
    stream's wake. Only a wake moving earlier pushes an entry, leaving the later one behind,
    superseded. So most results cost two dict writes, not a heap push (callgrind,
    processor_bench: 2 % of the Processor's instructions).
    """

    def __init__(self) -> None:
        self._heaps: dict[int, list[tuple[int, str]]] = {}
        self._wake: dict[int, dict[str, int]] = {}  # the wake of every indexed stream
        # The time of each stream's live heap entry: at or before its wake; other entries of
        # the stream are superseded.
        self._queued: dict[int, dict[str, int]] = {}

    def set(self, partition: int, stream_id: str, wake_ms: int | None) -> None:
        wakes = self._wake.get(partition)
        if wakes is None:
            wakes = self._wake[partition] = {}
            self._queued[partition] = {}
            self._heaps[partition] = []
        if wake_ms is None:
            wakes.pop(stream_id, None)
            return
        wakes[stream_id] = wake_ms
        queued = self._queued[partition]
        at = queued.get(stream_id)
        if at is not None and at <= wake_ms:
            return
        queued[stream_id] = wake_ms
        heap = self._heaps[partition]
        heapq.heappush(heap, (wake_ms, stream_id))
        if len(heap) > 2 * len(queued) + _SLACK:
            # Superseded entries pile up when wakes keep moving earlier: keep the heap within
            # twice the live entries.
            self._heaps[partition] = heap = [(w, s) for s, w in queued.items()]
            heapq.heapify(heap)

    def next_wake_ms(self, partition: int) -> int | None:
        heap = self._heaps.get(partition)
        if heap is None or not _settle(heap, self._wake[partition], self._queued[partition]):
            return None
        return heap[0][0]

    def pop_due(self, partition: int, now_ms: int, limit: int | None = None) -> list[str]:
        """The streams whose wake time is at or before `now_ms` (the earliest `limit` of them
        if given), removed from the index."""
        due: list[str] = []
        heap = self._heaps.get(partition)
        if heap is None:
            return due
        wakes, queued = self._wake[partition], self._queued[partition]
        while (limit is None or len(due) < limit) and _settle(heap, wakes, queued):
            if heap[0][0] > now_ms:
                break
            _, stream_id = heapq.heappop(heap)
            del wakes[stream_id], queued[stream_id]
            due.append(stream_id)
        return due

    def drop(self, partition: int) -> None:
        self._heaps.pop(partition, None)
        self._wake.pop(partition, None)
        self._queued.pop(partition, None)

    def clear(self) -> None:
        self._heaps.clear()
        self._wake.clear()
        self._queued.clear()

    def __len__(self) -> int:
        return sum(len(w) for w in self._wake.values())


def _settle(heap: list[tuple[int, str]], wakes: dict[str, int], queued: dict[str, int]) -> bool:
    """Make the heap's first entry live and at its stream's wake; False when none is left.

    Superseded entries and those of streams no longer indexed are dropped, and an entry that
    comes up before its stream's wake is pushed again at that wake.
    """
    while heap:
        wake_ms, stream_id = heap[0]
        if queued.get(stream_id) != wake_ms:
            heapq.heappop(heap)  # superseded
            continue
        actual_ms = wakes.get(stream_id)
        if actual_ms == wake_ms:
            return True
        if actual_ms is None:
            heapq.heappop(heap)
            del queued[stream_id]
        else:  # moved later since it was pushed
            heapq.heapreplace(heap, (actual_ms, stream_id))
            queued[stream_id] = actual_ms
    return False
