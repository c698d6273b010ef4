"""The Faust engine's state store: the Processor's StateStore port over a Faust table (RocksDB
with its changelog topic, kept by Faust). Keys and values are raw bytes: the Processor encodes
its records itself."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class TableStore:
    """The Processor's StateStore over a Faust table of raw bytes."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def get(self, stream_id: str) -> bytes | None:
        value: bytes | None = self._table.get(stream_id.encode())
        return value

    def set(self, stream_id: str, value: bytes) -> None:
        self._table[stream_id.encode()] = value

    def delete(self, stream_id: str) -> None:
        self._table.pop(stream_id.encode(), None)

    def items(self) -> Iterable[tuple[str, bytes]]:
        for key, value in self._table.items():
            yield key.decode(), value
