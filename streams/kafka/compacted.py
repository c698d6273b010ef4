"""A compacted topic read as its latest entry per key, each read going on where the last one
stopped (the operators' side of `health` and `pipelines`; the coordinators read theirs through
streams.kafka.global_table)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from streams.errors import InvalidInput
from streams.kafka.settings import KafkaSettings
from streams.kafka.topic_io import TopicReader, TopicRecord

T = TypeVar("T")
# key, value (None: a tombstone) -> the entry, None to forget the key; InvalidInput: skipped
Decode = Callable[[bytes, bytes | None], T | None]


class LatestEntries(Generic[T]):
    """The latest decoded entry of every key of `topic`. A record that does not decode is
    skipped (a reader must not stop on one bad entry); a tombstone forgets its key."""

    def __init__(self, settings: KafkaSettings, topic: str, decode: Decode[T]) -> None:
        self._reader = TopicReader(settings, [topic], f"{topic}-reader")
        self._decode = decode
        self.entries: dict[bytes, T] = {}

    def read(self, timeout_s: float) -> dict[bytes, T]:
        """Read on to the topic's end (or `timeout_s`); the entries then."""
        self._reader.read(timeout_s, self._apply)
        return self.entries

    def _apply(self, records: list[TopicRecord]) -> None:
        for record in records:
            if record.key is None:
                continue
            try:
                entry = self._decode(record.key, record.value)
            except InvalidInput:
                continue
            if entry is None:
                self.entries.pop(record.key, None)
            else:
                self.entries[record.key] = entry

    def close(self) -> None:
        self._reader.close()
