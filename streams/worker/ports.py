"""What the worker runtime needs from the outside: a task source, a result sink, an executor.

The executor is of the handler's kind (``streams.handler.handler_kind``): ``HandlerExecutor``
runs a sync handler's calls on threads (``streams.worker.pool.HandlerPool``),
``CoroutineExecutor`` a coroutine handler's on an asyncio loop (``streams.worker.aio``). Both
hand each outcome back to the loop thread the same way (``streams.worker.calls``), so that
everything the runtime decides (heartbeats, shutdown nacks, commits) is the same for both.

The runtime (``streams.worker.runtime``) owns the logic: which offsets may be committed, which
tasks wait, expire, heartbeat or are nacked at shutdown. These ports are the I/O it drives from
its one loop thread. ``streams.kafka.worker_io`` implements the source and the sink on
confluent-kafka; ``tests/worker/fakes.py`` implements all three in memory. What a source and a
sink report (a fetched record, a rebalance, a delivery) is the Kafka group member's vocabulary,
``streams.kafka.member``: plain types, which the adapter speaks without importing the worker.

Callbacks run only inside a call the runtime makes: the source's listener inside ``poll`` (and
``commit``), a send's ``delivered`` inside the sink's ``poll`` or ``flush``, as librdkafka does.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol

from streams.kafka.member import Delivered, Fetched, Partition, SourceListener


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


class CoroutineExecutor(Protocol):
    """Runs coroutine handler calls on an asyncio loop (``streams.worker.aio.LoopExecutor``)."""

    def start(self) -> None: ...

    def submit(self, call: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run the coroutine ``call()`` makes, which never raises, some time later."""

    def close(
        self, timeout_s: float, last: Callable[[], Coroutine[Any, Any, None]] | None = None
    ) -> bool:
        """Cancel the calls still running, waiting up to ``timeout_s``, then run ``last`` (the
        handler's ``aclose``) on the loop; True if all ended."""
