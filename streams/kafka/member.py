"""What a consumer group member's runtime and its Kafka clients say to each other, in plain
types: a partition, a record fetched, the rebalance listener, a delivery report.

No client is imported here: the worker's ports (streams.worker.ports) and their in-memory fakes
speak it without confluent-kafka, and streams.kafka.worker_io implements it without importing
the worker, so that `kafka/` stays the floor under the worker and the coordinator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeAlias

Partition: TypeAlias = tuple[str, int]
"""A topic's partition, as (topic, number)."""


@dataclass(frozen=True, slots=True)
class Fetched:
    """One record taken off a topic (``tasks``): where it was and its raw value."""

    partition: Partition
    offset: int
    value: bytes | None


class SourceListener(Protocol):
    """What a task source reports while the runtime polls it."""

    def assigned(self, partitions: list[Partition]) -> None:
        """These partitions are now the worker's: their records will come from ``poll``."""

    def revoked(self, partitions: list[Partition]) -> None:
        """These partitions leave in an orderly way: this is the last chance to commit them."""

    def lost(self, partitions: list[Partition]) -> None:
        """These partitions are already someone else's: committing them would fail."""

    def commit_failed(self, partitions: list[Partition]) -> None:
        """An asynchronous commit of these partitions failed; it should be made again."""

    def fatal(self, reason: str) -> None:
        """The source or the sink cannot go on; the worker must stop."""


Delivered = Callable[[str | None], None]
"""Called once per send: with None when the broker confirmed it, else with why it failed."""
