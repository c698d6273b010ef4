"""The in-memory due-index: which streams of a partition need the clock, and when.

A tick for a partition then costs O(due streams), not a scan of the table. The index is only a
cache of `next_due_ms` over the table; it is rebuilt from the table when a partition is assigned.
"""

from __future__ import annotations

import heapq

_SLACK = 1024


class DueIndex:
    """Per partition, the wake of every indexed stream, and a heap of (wake_ms, stream_id)
    entries in which each indexed stream has one at or before its wake.

    A stream's wake moving later (a new deadline on every dispatch, the usual case) pushes
    nothing: its entry stays at the earlier time and, when it comes up, is pushed again at the
    stream's wake. Only a wake moving earlier (or a new one) pushes an entry; the stream's later
    entry is then superseded, and dropped when it comes up. So most results cost a dict write,
    not a heap push (callgrind, processor_bench: 2 % of the Processor's instructions).
    """

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
        old_ms = wakes.get(stream_id)
        wakes[stream_id] = wake_ms
        if old_ms is not None and old_ms <= wake_ms:
            return  # its entry, at or before old_ms, comes up in time
        heap = self._heaps[partition]
        heapq.heappush(heap, (wake_ms, stream_id))
        if len(heap) > 2 * len(wakes) + _SLACK:
            # Superseded entries pile up when wakes keep moving earlier: keep the heap within
            # twice the live entries.
            self._heaps[partition] = heap = [(w, s) for s, w in wakes.items()]
            heapq.heapify(heap)

    def next_wake_ms(self, partition: int) -> int | None:
        heap = self._heaps.get(partition)
        if heap is None or not _settle(heap, self._wake[partition]):
            return None
        return heap[0][0]

    def pop_due(self, partition: int, now_ms: int, limit: int | None = None) -> list[str]:
        """The streams whose wake time is at or before `now_ms` (the earliest `limit` of them
        if given), removed from the index."""
        due: list[str] = []
        heap = self._heaps.get(partition)
        if heap is None:
            return due
        wakes = self._wake[partition]
        while (limit is None or len(due) < limit) and _settle(heap, wakes):
            if heap[0][0] > now_ms:
                break
            _, stream_id = heapq.heappop(heap)
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


def _settle(heap: list[tuple[int, str]], wakes: dict[str, int]) -> bool:
    """Make the heap's first entry one at its stream's wake; False when none is left.

    An entry after its stream's wake is superseded (the stream has an earlier one) and one of a
    stream no longer indexed is stale: both are dropped. An entry before its stream's wake (the
    wake moved later since) is pushed again at that wake.
    """
    while heap:
        entry_ms, stream_id = heap[0]
        wake_ms = wakes.get(stream_id)
        if wake_ms == entry_ms:
            return True
        if wake_ms is None or wake_ms < entry_ms:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (wake_ms, stream_id))
    return False
