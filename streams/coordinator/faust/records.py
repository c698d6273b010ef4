"""The Faust engine's stream records: read through a cache and written through to the store at
every save, since Faust puts a table write in the changelog partition of the event being
handled."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator

from streams.coordinator.ports import StateStore
from streams.coordinator.record import Record, Summary
from streams.coordinator.records import RECORD_CACHE_SIZE, decode, scan_stored


class WriteThroughRecords:
    """Records written to the store at every save (the Faust engine's)."""

    decode = staticmethod(decode)

    def __init__(self, store: StateStore, cache_size: int = RECORD_CACHE_SIZE) -> None:
        self.store = store
        self._cache_size = cache_size
        # stream -> (the stored bytes it was decoded from or saved as, record): an LRU of at
        # most `cache_size` (an OrderedDict evicts its oldest in O(1); a dict's `next(iter(d))`
        # scans the slots its deletions left, which made a rebuild of a million streams
        # quadratic).
        self._cache: OrderedDict[str, tuple[bytes, Record]] = OrderedDict()

    def load(self, stream_id: str) -> Record | None:
        """The stream's record, or None if it has none.

        Raises InvalidInput when the stored value cannot be read, so that the input that needed
        it is rejected with that reason instead of stopping the coordinator.
        """
        raw = self.store.get(stream_id)
        if raw is None:
            return None
        cached = self._cache.get(stream_id)
        if cached is not None and cached[0] == raw:
            return cached[1]
        record = self.decode(stream_id, raw)
        self._remember(stream_id, raw, record)
        return record

    def peek(self, stream_id: str) -> Record | None:
        """Like `load` (a write-through store has no restore point to skip)."""
        return self.load(stream_id)

    def exists(self, stream_id: str) -> bool:
        """Whether anything, readable or not, is stored for the stream."""
        return self.store.get(stream_id) is not None

    # The bytes `save` will write. Called before the event's outputs go out, so that a record
    # that cannot be encoded fails the event before anything was sent.
    encode = staticmethod(Record.encode)

    def save(self, stream_id: str, record: Record, encoded: bytes | None) -> None:
        assert encoded is not None
        self.store.set(stream_id, encoded)
        self._remember(stream_id, encoded, record)

    def delete(self, stream_id: str) -> None:
        self.store.delete(stream_id)
        self._cache.pop(stream_id, None)

    def discard(self, stream_id: str) -> None:
        """Forget the in-memory record (an event failed halfway): the next load reads the
        store, which holds it as it was before that event."""
        self._cache.pop(stream_id, None)

    def checkpoint(self) -> list[str]:
        """Everything is written at each save: nothing waits for a checkpoint."""
        return []

    def dirty(self) -> bool:
        return False

    def changed(self) -> Iterator[tuple[str, Record | None]]:
        return iter(())

    def scan(
        self, owned: Callable[[str], bool], whole: bool = True
    ) -> Iterator[tuple[str, Summary | None, Record | None]]:
        """Every stored stream that `owned` accepts, read afresh from the store, with its
        summary (None: unreadable) and its record. With `whole=False` a record is decoded (and
        cached) while the cache has room, and past that only where its stored summary does not
        do (streams.coordinator.record.stored_summary), its record then None: a rebuild of a
        million streams decodes as many states as it can hold, not all of them."""
        yield from scan_stored(
            self.store.items(),
            self.decode,
            lambda stream_id: not owned(stream_id),
            self.discard,
            lambda: whole or len(self._cache) < self._cache_size,
            self._remember,
        )

    def forget(self, owned: Callable[[str], bool]) -> None:
        """Drop everything in memory about the streams `owned` accepts (their partitions went)."""
        for stream_id in [s for s in self._cache if owned(s)]:
            del self._cache[stream_id]

    def reset(self) -> None:
        """Forget everything in memory; the store is the truth again."""
        self._cache.clear()

    def _remember(self, stream_id: str, raw: bytes, record: Record) -> None:
        cache = self._cache
        cache[stream_id] = (raw, record)
        cache.move_to_end(stream_id)
        if len(cache) > self._cache_size:
            cache.popitem(last=False)
