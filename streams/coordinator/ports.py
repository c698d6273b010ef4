"""What the coordinator's logic needs from the outside: a state store and an emitter. The
engine's unit of work, which is built on these, is streams.coordinator.delivery."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol


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
