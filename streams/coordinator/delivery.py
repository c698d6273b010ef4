"""The seam between the Processor and its engine: the engine's unit of work (`Delivery`).

Apart from ports.py (a store, an emitter), because a delivery builds the records, announcer and
views that themselves use those ports.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Protocol

from streams.coordinator.announcer import Announcer
from streams.coordinator.ports import Emitter, StateStore
from streams.coordinator.records import Records
from streams.coordinator.replays import ReplayAnnouncer
from streams.coordinator.telemetry.metrics import CoordinatorMetrics
from streams.coordinator.views import Views
from streams.topics import Topics


class Delivery(Protocol):
    """An engine's unit of work: how the Processor's outputs and state changes become durable.

    The engine hands one to its Processor, which builds its records, announcer and views from
    it and otherwise never asks which engine it runs under. Two exist: the Faust engine's outbox
    with delivery confirmations (streams.coordinator.faust.outbox.OutboxDelivery) and the Kafka
    transaction (streams.coordinator.confluent.delivery.TransactionDelivery).
    """

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

    def replay_announcer(self, topics: Topics, emitter: Emitter) -> ReplayAnnouncer:
        """How the replay lane announces replayed windows (streams.coordinator.replays)."""
        ...

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
