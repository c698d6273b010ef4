"""Committing the safe positions of ``OffsetTracker`` through the task source.

While the worker runs, commits are asynchronous and at most every ``interval_s``: a failed one
(reported as ``commit_failed``) is offered again by the tracker, and any later commit covers an
earlier one. When partitions leave the worker or it stops, the commit waits for its answer, as
the chance to commit those partitions ends there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from streams.kafka.member import Partition
from streams.worker.offsets import OffsetTracker
from streams.worker.ports import TaskSource

log = logging.getLogger("streams.worker")


class Committer:
    """Owns the tracker's view of assignments and commits what it allows."""

    def __init__(
        self,
        source: TaskSource,
        tracker: OffsetTracker,
        interval_s: float = 0.1,
        monotonic_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._tracker = tracker
        self._interval_s = interval_s
        self._monotonic_s = monotonic_s
        self._next_s = 0.0

    def assigned(self, partitions: list[Partition]) -> None:
        """Partitions joined this worker: track them afresh."""
        for partition in partitions:
            self._tracker.assign(partition)

    def released(self, partitions: list[Partition], *, commit: bool) -> set[Partition]:
        """Partitions left (revoked, or lost if not ``commit``): commit their safe positions."""
        keys = set(partitions)
        positions = {}
        for key in keys:
            position = self._tracker.revoke(key)
            if position is not None:
                positions[key] = position
        if commit:
            self._commit(positions, wait=True)
        return keys

    def commit_due(self) -> None:
        """Commit moved positions asynchronously, unless the last commit was very recent."""
        now_s = self._monotonic_s()
        if now_s >= self._next_s:
            self._next_s = now_s + self._interval_s
            self._commit(self._tracker.committable(), wait=False)

    def commit_now(self) -> None:
        """Commit moved positions and wait for the answer."""
        self._commit(self._tracker.committable(), wait=True)

    def commit_failed(self, partitions: list[Partition]) -> None:
        """An asynchronous commit failed: those partitions are committed again later."""
        log.warning("commit failed; will retry: %s", partitions)
        self._tracker.commit_failed(partitions)

    def _commit(self, positions: Mapping[Partition, int], *, wait: bool) -> None:
        if positions and self._source.commit(positions, wait=wait):
            self._tracker.mark_committed(dict(positions))
