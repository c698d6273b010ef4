"""Committing the safe positions of ``OffsetTracker`` through the consumer.

While the worker runs, commits are asynchronous and at most every ``interval_s``: a failed one
(reported through ``on_commit``) is offered again by the tracker, and any later commit covers
an earlier one. When partitions leave the worker or it stops, the commit is synchronous, as
the chance to commit those partitions ends there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.cimpl import TopicPartition

from streams.worker.offsets import OffsetTracker, Partition

log = logging.getLogger("streams.worker")


class Committer:
    """Owns the tracker's view of assignments and commits what it allows."""

    def __init__(self, consumer: Consumer, tracker: OffsetTracker, interval_s: float = 0.1) -> None:
        self._consumer = consumer
        self._tracker = tracker
        self._interval_s = interval_s
        self._next_s = 0.0

    def assigned(self, partitions: list[TopicPartition]) -> None:
        """Partitions joined this worker: track them afresh."""
        for tp in partitions:
            self._tracker.assign((tp.topic, tp.partition))

    def released(self, partitions: list[TopicPartition], *, commit: bool) -> set[Partition]:
        """Partitions left (revoked, or lost if not ``commit``): commit their safe positions."""
        keys = {(tp.topic, tp.partition) for tp in partitions}
        positions = {}
        for key in keys:
            position = self._tracker.revoke(key)
            if position is not None:
                positions[key] = position
        if commit:
            self._commit(positions, asynchronous=False)
        return keys

    def commit_due(self) -> None:
        """Commit moved positions asynchronously, unless the last commit was very recent."""
        now_s = time.monotonic()
        if now_s >= self._next_s:
            self._next_s = now_s + self._interval_s
            self._commit(self._tracker.committable(), asynchronous=True)

    def commit_now(self) -> None:
        """Commit moved positions and wait for the answer."""
        self._commit(self._tracker.committable(), asynchronous=False)

    def on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """The consumer's ``on_commit`` callback: failed partitions are committed again later."""
        failed = [(tp.topic, tp.partition) for tp in partitions if err or tp.error]
        if failed:
            log.warning("commit failed (%s); will retry: %s", err, failed)
            self._tracker.commit_failed(failed)

    def _commit(self, positions: Mapping[Partition, int], *, asynchronous: bool) -> None:
        if not positions:
            return
        offsets = [TopicPartition(t, p, o) for (t, p), o in positions.items()]
        try:
            if asynchronous:
                self._consumer.commit(offsets=offsets, asynchronous=True)
            else:
                for tp in self._consumer.commit(offsets=offsets, asynchronous=False) or []:
                    if tp.error is not None:
                        log.warning("commit of %s[%d] failed: %s", tp.topic, tp.partition, tp.error)
        except KafkaException as exc:
            log.warning("commit of %s failed: %s", dict(positions), exc)
            return
        self._tracker.mark_committed(dict(positions))
