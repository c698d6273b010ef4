"""Takeover grace, the engine's half: which owned partitions have read `results` as far as
they stood when they were assigned.

An engine notes, per assigned partition, where its group resumes reading `results` and where
the log ended at assignment (`expect`), then the next offset it has read (`reached`). Once the
one reaches the other, the Processor is told (`on_caught_up`), and deadlines count again
(streams.coordinator.ownership). An assignment's figures that arrive after a later rebalance
are ignored: each assignment has its generation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


class CatchUp:
    def __init__(self, on_caught_up: Callable[[int], None]) -> None:
        self._on_caught_up = on_caught_up
        self.generation = 0
        self.pending: dict[int, int] = {}  # partition -> the end to read up to

    def assigned(self) -> int:
        """A rebalance: returns the generation that this assignment's `expect` calls carry."""
        self.generation += 1
        return self.generation

    def expect(self, generation: int, partition: int, resume_at: int, end: int) -> None:
        if generation != self.generation:
            return  # figures of an assignment since superseded
        if resume_at >= end:
            self.pending.pop(partition, None)
            self._on_caught_up(partition)
        else:
            self.pending[partition] = end

    def reached(self, partition: int, next_offset: int) -> None:
        end = self.pending.get(partition)
        if end is not None and next_offset >= end:
            del self.pending[partition]
            self._on_caught_up(partition)

    def forget(self, partitions: Iterable[int]) -> None:
        for p in partitions:
            self.pending.pop(p, None)
