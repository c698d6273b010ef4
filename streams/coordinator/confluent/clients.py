"""What the `confluent` engine needs from Kafka: one group consumer and one transactional producer.

`streams.kafka.transactions.TransactionalClients` is the Kafka implementation; the tests drive the
engine over an in-process fake (tests/coordinator/fake_clients.py) that can fail at any step of a
commit, so that the commit path, an abort, a rewind and a revocation run without a broker.
Errors are the engine's own: `TransactionAborted` (abort, rewind, go on) and `TransactionFatal`
and its kinds (renew the clients: streams.coordinator.confluent.renewal).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from streams.kafka.transactions import Input, Partitions

# librdkafka's delivery report: (error or None, message); the message answers partition() and
# offset().
DeliveryReport = Callable[[Any, Any], None]


class TransactionClients(Protocol):
    # -- the group ------------------------------------------------------------------------
    def subscribe(
        self, topics: Sequence[str], assigned: Partitions, revoked: Partitions, lost: Partitions
    ) -> None: ...

    def poll(self, max_messages: int, timeout_s: float) -> list[Input]:
        """The next inputs; the rebalance callbacks run inside this call."""
        ...

    def committed(self, tps: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The group's committed offsets (the low watermark where none is)."""
        ...

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]: ...

    def assign(self, offsets: dict[tuple[str, int], int]) -> None: ...

    def seek(self, offsets: dict[tuple[str, int], int]) -> None: ...

    # -- the transaction ------------------------------------------------------------------
    def init_transactions(self) -> None: ...

    def produce(
        self,
        topic: str,
        key: bytes,
        value: bytes | None,
        partition: int | None = None,
        on_delivery: DeliveryReport | None = None,
    ) -> None:
        """Join the open transaction (the first produce begins one)."""
        ...

    @property
    def in_transaction(self) -> bool: ...

    def send_offsets(self, offsets: dict[tuple[str, int], int]) -> None:
        """Add the input offsets, with the group's metadata, to the open transaction."""
        ...

    def commit_transaction(self) -> None:
        """Commit the open transaction: flushes every output first, and fails (abortable) if
        any was not delivered."""
        ...

    def abort(self) -> None: ...

    def close(self) -> None: ...

    def detach(self) -> None: ...


class TransactionEmitter:
    """The Processor's Emitter: every output joins the open transaction."""

    def __init__(self, clients: TransactionClients) -> None:
        self.bind(clients)

    def bind(self, clients: TransactionClients) -> None:
        """Send through these clients from now on (renewed ones)."""
        self._produce = clients.produce

    def send(
        self,
        topic: str,
        key: bytes,
        value: bytes | None,
        on_delivered: Callable[[], None] | None = None,
        on_failed: Callable[[], None] | None = None,
    ) -> None:
        """Delivery callbacks are never passed in transactional mode: the commit confirms all."""
        self._produce(topic, key, value)
