"""What the worker runtime needs from the outside: a task source, a result sink, an executor.

The runtime (``streams.worker.runtime``) owns the logic: which offsets may be committed, which
tasks wait, expire, heartbeat or are nacked at shutdown. These ports are the I/O it drives from
its one loop thread. ``streams.kafka.worker_io`` implements the source and the sink on
confluent-kafka; ``tests/worker/fakes.py`` implements all three in memory.

Callbacks run only inside a call the runtime makes: the source's listener inside ``poll`` (and
``commit``), a send's ``delivered`` inside the sink's ``poll`` or ``flush``, as librdkafka does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from streams.worker.offsets import Partition


@dataclass(frozen=True, slots=True)
class Fetched:
    """One record taken off ``tasks``: where it was and its raw value."""

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


class TaskSource(Protocol):
    """The ``tasks`` topic as a consumer group member sees it."""

    def open(self, listener: SourceListener) -> None:
        """Join the group; rebalances are reported to ``listener`` from ``poll``."""

    def poll(self, timeout_s: float) -> Fetched | None:
        """The next record, waiting up to ``timeout_s``; also serves rebalances."""

    def pause(self) -> None:
        """Stop fetching from every partition, those assigned later included."""

    def resume(self) -> None:
        """Fetch again."""

    def commit(self, positions: Mapping[Partition, int], *, wait: bool) -> bool:
        """Commit these next-offsets; False if the commit could not even be made.

        Without ``wait`` a failure may instead come later, as ``listener.commit_failed``.
        """

    def close(self) -> None:
        """Leave the group."""


Delivered = Callable[[str | None], None]
"""Called once per send: with None when the broker confirmed it, else with why it failed."""


class ResultSink(Protocol):
    """The ``results`` topic, written by key (the stream id)."""

    def open(self, on_fatal: Callable[[str], None]) -> None:
        """Get ready to send; ``on_fatal`` is called if the sink cannot go on."""

    def send(self, key: bytes, value: bytes, delivered: Delivered) -> None:
        """Queue a value; ``delivered`` is called from a later ``poll`` or ``flush``."""

    def poll(self) -> None:
        """Serve the delivery reports that are ready, without waiting."""

    def flush(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for every queued value; return how many are left."""


class HandlerExecutor(Protocol):
    """Runs handler calls off the loop thread (``streams.worker.pool.HandlerPool``)."""

    def start(self) -> None: ...

    def submit(self, call: Callable[[], None]) -> None:
        """Run ``call``, which never raises, some time later."""

    def close(self, timeout_s: float) -> bool:
        """Stop, waiting up to ``timeout_s`` for running calls; True if all ended."""
