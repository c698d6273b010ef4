"""The in-memory due-index: which streams of a partition need the clock, and when.

A tick for a partition then costs O(due streams), not a scan of the table. The index is only a
cache of `next_due_ms` over the table; it is rebuilt from the table when a partition is assigned.
"""

from __future__ import annotations

import heapq

_SLACK = 1024


class DueIndex:
    """Per partition, a heap of (wake_ms, stream_id) with lazy deletion."""

    def __init__(self) -> None:
        self._heaps: dict[int, list[tuple[int, str]]] = {}
        self._wake: dict[int, dict[str, int]] = {}

    def set(self, partition: int, stream_id: str, wake_ms: int | None) -> None:
        wakes = self._wake.get(partition)
        if wakes is None:
            wakes = self._wake[partition] = {}
            self._heaps[partition] = []
        if wake_ms is None:
            wakes.pop(stream_id, None)
            return
        if wakes.get(stream_id) == wake_ms:
            return
        wakes[stream_id] = wake_ms
        heap = self._heaps[partition]
        heapq.heappush(heap, (wake_ms, stream_id))
        if len(heap) > 2 * len(wakes) + _SLACK:
            # Superseded entries pile up when wakes move later (a deadline per dispatch):
            # keep the heap within twice the live entries.
            self._heaps[partition] = heap = [(w, s) for s, w in wakes.items()]
            heapq.heapify(heap)

    def next_wake_ms(self, partition: int) -> int | None:
        heap, wakes = self._heaps.get(partition), self._wake.get(partition, {})
        while heap:
            wake_ms, stream_id = heap[0]
            if wakes.get(stream_id) == wake_ms:
                return wake_ms
            heapq.heappop(heap)  # superseded entry
        return None

    def pop_due(self, partition: int, now_ms: int, limit: int | None = None) -> list[str]:
        """The streams whose wake time is at or before `now_ms` (the earliest `limit` of them
        if given), removed from the index."""
        due: list[str] = []
        heap, wakes = self._heaps.get(partition), self._wake.get(partition, {})
        while heap and heap[0][0] <= now_ms and (limit is None or len(due) < limit):
            wake_ms, stream_id = heapq.heappop(heap)
            if wakes.get(stream_id) == wake_ms:
                del wakes[stream_id]
                due.append(stream_id)
        return due

    def drop(self, partition: int) -> None:
        self._heaps.pop(partition, None)
        self._wake.pop(partition, None)

    def clear(self) -> None:
        self._heaps.clear()
        self._wake.clear()

    def __len__(self) -> int:
        return sum(len(w) for w in self._wake.values())
