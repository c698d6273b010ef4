"""The stream records as the Processor reads and writes them (`Records`), whichever engine
writes them: the Faust engine's write through to the store at every save
(streams.coordinator.faust.records), the confluent engine's once per transaction into its buffer
(streams.coordinator.confluent.records).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from streams.coordinator.record import Record, Summary, stored_summary, summary_of
from streams.errors import InvalidInput

log = logging.getLogger("streams.coordinator")

# Decoded records kept in memory, so that a load skips the JSON decode and validation; the least
# recently used goes first. Every other record is read from the store when needed.
RECORD_CACHE_SIZE = 100_000


def decode(stream_id: str, raw: bytes) -> Record:
    try:
        return Record.decode(raw)
    except Exception as exc:  # whatever the bytes are, the coordinator goes on
        log.error("unreadable state for stream %r, left alone: %s", stream_id, exc)
        raise InvalidInput("state", f"the stored state of {stream_id!r} is unreadable") from exc


class Records(Protocol):
    """The records as the Processor reads and writes them, whichever engine writes them."""

    def load(self, stream_id: str) -> Record | None: ...
    def peek(self, stream_id: str) -> Record | None: ...
    def exists(self, stream_id: str) -> bool: ...
    def encode(self, record: Record) -> bytes | None: ...
    def save(self, stream_id: str, record: Record, encoded: bytes | None) -> None: ...
    def delete(self, stream_id: str) -> None: ...
    def discard(self, stream_id: str) -> None: ...
    def checkpoint(self) -> list[str]: ...
    def dirty(self) -> bool: ...
    def changed(self) -> Iterator[tuple[str, Record | None]]: ...
    def scan(
        self, owned: Callable[[str], bool], whole: bool = True
    ) -> Iterator[tuple[str, Summary | None, Record | None]]: ...
    def forget(self, owned: Callable[[str], bool]) -> None: ...
    def reset(self) -> None: ...


def scan_stored(
    items: Iterable[tuple[str, bytes]],
    decode_one: Callable[[str, bytes], Record],
    skip: Callable[[str], bool],
    discard: Callable[[str], None],
    decode_more: Callable[[], bool],
    remember: Callable[[str, bytes, Record], None],
) -> Iterator[tuple[str, Summary | None, Record | None]]:
    """A rebuild's read of stored records, for both engines' `scan`: each stream not skipped,
    with its summary (None: unreadable) and its record. A record is decoded (and remembered)
    while `decode_more()` says so, and past that only where its stored summary does not do
    (streams.coordinator.record.stored_summary), its record then None: a rebuild of a million
    streams decodes as many states as the cache holds, not all of them."""
    for stream_id, raw in items:
        if skip(stream_id):
            continue
        discard(stream_id)  # another coordinator may have changed it
        if not decode_more():
            summary = stored_summary(raw)
            if summary is not None:
                yield stream_id, summary, None
                continue
        try:
            record = decode_one(stream_id, raw)
        except InvalidInput:
            yield stream_id, None, None
            continue
        remember(stream_id, raw, record)
        yield stream_id, summary_of(record.state), record
