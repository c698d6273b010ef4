"""What the coordinator's logic needs from the outside: a state store, an emitter, and the
engine's delivery (its unit of work)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from streams.coordinator.announcer import Announcer
    from streams.coordinator.metrics import CoordinatorMetrics
    from streams.coordinator.records import Records
    from streams.coordinator.topics import Topics
    from streams.coordinator.views import Views


class StateStore(Protocol):
    def get(self, stream_id: str) -> bytes | None: ...
    def set(self, stream_id: str, value: bytes) -> None: ...
    def delete(self, stream_id: str) -> None: ...
    def items(self) -> Iterable[tuple[str, bytes]]: ...


class Emitter(Protocol):
    def send(
        self,
        topic: str,
        key: bytes,
        value: bytes | None,
        on_delivered: Callable[[], None] | None = None,
        on_failed: Callable[[], None] | None = None,
    ) -> None:
        """Queue a message (a None value is a tombstone).

        `on_delivered` runs once the broker has it; `on_failed` once the producer gave it up.
        Callbacks are only passed by the at-least-once (Faust) engine; a transactional engine's
        emitter is called with the first three arguments alone.
        """


class Delivery(Protocol):
    """An engine's unit of work: how the Processor's outputs and state changes become durable.

    The engine hands one to its Processor, which builds its records, announcer and views from
    it and otherwise never asks which engine it runs under. Two exist: the Faust engine's outbox
    with delivery confirmations (streams.coordinator.faust_outbox.OutboxDelivery) and the Kafka
    transaction (streams.coordinator.confluent.delivery.TransactionDelivery).
    """

    # Whether the replay lane keeps its announcements until delivered (streams.coordinator
    # .replays: its own outbox).
    outbox: bool

    def records(self, store: StateStore) -> Records: ...

    def announcer(
        self,
        topics: Topics,
        emitter: Emitter,
        stats: Counter[str],
        metrics: CoordinatorMetrics,
        flush_ms: int,
        wake: Callable[[str], None],
    ) -> Announcer: ...

    def views(self, topics: Topics, wake: Callable[[str], None]) -> Views: ...

    def dirty(self, now_ms: int) -> bool:
        """Whether the unit of work holds something to commit (state, or a view now due)."""
        ...

    def checkpoint(
        self, now_ms: int, emitter: Emitter, failed: Callable[[str, Exception], None]
    ) -> list[str]:
        """Close the unit of work before the engine commits it: announce the windows waiting,
        publish the views owed (through `emitter`), encode every changed record into it.
        `failed(stream_id, exc)`
        is told of a stream whose announcement failed; returns the streams whose record could
        not be encoded (rolled back)."""
        ...
