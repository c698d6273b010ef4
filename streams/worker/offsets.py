"""Which offsets a worker may commit: per partition, the contiguous prefix of finished tasks.

Tasks of one partition finish in any order when they run concurrently, but a committed offset
says "everything before this is done". So a partition's commit position is its lowest
unfinished offset, or, when nothing is unfinished, one past the highest offset seen. Gaps in
the offsets (transaction markers, compaction) are skipped over, since only offsets that were
actually fetched can be unfinished.

Each assignment of a partition is a new *generation*: a task fetched under an earlier one
(the partition was revoked, maybe assigned again since) can still finish, but its ``finish``
is ignored, because its partition's commits are now someone else's business.

This module is pure: no Kafka, no clock, no threads. The runtime calls it from one thread.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from streams.kafka.member import Partition  # a topic and a partition number


@dataclass(frozen=True)
class OffsetToken:
    """One fetched offset under one assignment generation; handed back to ``finish``."""

    partition: Partition
    offset: int
    generation: int


@dataclass
class _PartitionState:
    generation: int
    next_offset: int | None = None  # one past the highest offset seen
    committed: int | None = None  # the last position reported as committed
    unfinished: set[int] = field(default_factory=set)
    heap: list[int] = field(default_factory=list)  # unfinished offsets, lazily pruned

    def position(self) -> int | None:
        while self.heap and self.heap[0] not in self.unfinished:
            heapq.heappop(self.heap)
        return self.heap[0] if self.heap else self.next_offset


class OffsetTracker:
    """Tracks fetched and finished offsets per assigned partition; says what may be committed."""

    def __init__(self) -> None:
        self._partitions: dict[Partition, _PartitionState] = {}
        self._generation = 0

    def assign(self, partition: Partition) -> None:
        """Start tracking ``partition`` afresh (a new generation), dropping any earlier state."""
        self._generation += 1
        self._partitions[partition] = _PartitionState(self._generation)

    def revoke(self, partition: Partition) -> int | None:
        """Stop tracking ``partition``; return its last safe position if it was not committed.

        Tasks of this partition that finish later are ignored by ``finish``.
        """
        state = self._partitions.pop(partition, None)
        if state is None:
            return None
        position = state.position()
        return position if position is not None and position != state.committed else None

    def start(self, partition: Partition, offset: int) -> OffsetToken | None:
        """Record a fetched offset as unfinished and return its token.

        Returns None when the offset must not be processed: the partition is not assigned, or
        the offset was already seen under this assignment (a redelivery after a fetch reset).
        """
        state = self._partitions.get(partition)
        if state is None or offset < 0:
            return None
        if state.next_offset is not None and offset < state.next_offset:
            return None
        state.next_offset = offset + 1
        state.unfinished.add(offset)
        heapq.heappush(state.heap, offset)
        return OffsetToken(partition, offset, state.generation)

    def finish(self, token: OffsetToken) -> bool:
        """Mark a fetched offset finished; False if its assignment is gone (nothing changes)."""
        state = self._partitions.get(token.partition)
        if state is None or state.generation != token.generation:
            return False
        if token.offset not in state.unfinished:
            raise ValueError(f"offset {token.offset} of {token.partition} is not unfinished")
        state.unfinished.discard(token.offset)
        if len(state.heap) > 2 * len(state.unfinished) + 64:
            # Finished offsets behind a long-unfinished one are pruned only once it finishes:
            # rebuild, or a stuck task would make the heap grow with every task after it.
            state.heap = sorted(state.unfinished)  # a sorted list is a heap
        return True

    def committable(self) -> dict[Partition, int]:
        """The commit position of every partition whose position moved since its last commit."""
        found = {}
        for partition, state in self._partitions.items():
            position = state.position()
            if position is not None and position != state.committed:
                found[partition] = position
        return found

    def mark_committed(self, positions: dict[Partition, int]) -> None:
        """Remember positions as committed (partitions revoked meanwhile are ignored)."""
        for partition, position in positions.items():
            state = self._partitions.get(partition)
            if state is not None:
                state.committed = position

    def commit_failed(self, partitions: list[Partition]) -> None:
        """Forget the last commit of these partitions, so that ``committable`` offers it again."""
        for partition in partitions:
            state = self._partitions.get(partition)
            if state is not None:
                state.committed = None

    def unfinished(self, partition: Partition) -> int:
        """How many fetched offsets of ``partition`` are not finished (0 if not assigned)."""
        state = self._partitions.get(partition)
        return len(state.unfinished) if state else 0

    def assigned(self) -> list[Partition]:
        """The partitions tracked now."""
        return list(self._partitions)
