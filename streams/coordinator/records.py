"""The stream records the Processor works on: read through a cache, written inline or at checkpoint.

At-least-once (Faust): every save writes the store at once, since Faust puts a table write in the
changelog partition of the event being handled. Transactional: the Processor is the only writer
of its store between resets, so the cache is the truth; a changed record is encoded only before
the stream's next event (its restore point, should that event fail) and at checkpoint, and is
written once per transaction.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator

from streams.coordinator.ports import StateStore
from streams.coordinator.record import Record, Summary, stored_summary, summary_of
from streams.errors import InvalidInput

log = logging.getLogger("streams.coordinator")

# Decoded records kept in memory, so that a load skips the JSON decode and validation; the least
# recently used goes first. Every other record is read from the store when needed.
RECORD_CACHE_SIZE = 100_000
_ABSENT = b""  # never a stored record (an empty value does not decode)


class Records:
    def __init__(
        self, store: StateStore, transactional: bool, cache_size: int = RECORD_CACHE_SIZE
    ) -> None:
        self.store = store
        self.transactional = transactional
        self._cache_size = cache_size
        # At-least-once: stream -> (the stored bytes it was decoded from or saved as, record).
        # Both caches are LRUs of at most `cache_size` (an OrderedDict evicts its oldest in
        # O(1); a dict's `next(iter(d))` scans the slots its deletions left, which made a
        # rebuild of a million streams quadratic).
        self._cache: OrderedDict[str, tuple[bytes, Record]] = OrderedDict()
        # Transactional: decoded records (at most `cache_size`: a record changed since its last
        # encode is held by `_stale` as well, so evicting it loses nothing); those changed since
        # their last encode; and the bytes (None: a delete) that the next checkpoint writes.
        self._live: OrderedDict[str, Record] = OrderedDict()
        self._stale: dict[str, Record] = {}
        self._pending: dict[str, bytes | None] = {}

    def load(self, stream_id: str) -> Record | None:
        """The stream's record, or None if it has none.

        Raises InvalidInput when the stored value cannot be read, so that the input that needed
        it is rejected with that reason instead of stopping the coordinator.
        """
        if self.transactional:
            record = self._stale.pop(stream_id, None)
            if record is not None:
                # The restore point before this event: `discard` goes back to it.
                self._pending[stream_id] = record.encode(exact=False)
                self._remember_live(stream_id, record)
                return record
            live = self._live
            record = live.get(stream_id)
            if record is not None:
                live.move_to_end(stream_id)
                return record
            raw = self._pending.get(stream_id, _ABSENT)
            if raw is _ABSENT:
                raw = self.store.get(stream_id)
            if raw is None:
                return None
            record = self.decode(stream_id, raw)
            self._remember_live(stream_id, record)
            return record
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
        """Like `load`, without making a restore point (for changes that cannot fail halfway)."""
        if self.transactional:
            record = self._stale.get(stream_id)
            if record is not None:
                return record
        return self.load(stream_id)

    def exists(self, stream_id: str) -> bool:
        """Whether anything, readable or not, is stored for the stream."""
        if self.transactional:
            if stream_id in self._live or stream_id in self._stale:
                return True
            if stream_id in self._pending:
                return self._pending[stream_id] is not None
        return self.store.get(stream_id) is not None

    def encode(self, record: Record) -> bytes | None:
        """The bytes `save` will write now (at-least-once); None when it writes at checkpoint.

        Called before the event's outputs go out, so that a record that cannot be encoded
        fails the event before anything was sent.
        """
        return None if self.transactional else record.encode()

    def save(self, stream_id: str, record: Record, encoded: bytes | None) -> None:
        if self.transactional:
            self._stale[stream_id] = record
            if self._live.get(stream_id) is not record:  # else `load` just moved it to the end
                self._remember_live(stream_id, record)
            return
        assert encoded is not None
        self.store.set(stream_id, encoded)
        self._remember(stream_id, encoded, record)

    def delete(self, stream_id: str) -> None:
        if self.transactional:
            self._stale.pop(stream_id, None)
            self._live.pop(stream_id, None)
            self._pending[stream_id] = None
            return
        self.store.delete(stream_id)
        self._cache.pop(stream_id, None)

    def discard(self, stream_id: str) -> None:
        """Forget the in-memory record (an event failed halfway): the next load goes back to
        the last encoded one, from before that event."""
        self._cache.pop(stream_id, None)
        self._live.pop(stream_id, None)
        self._stale.pop(stream_id, None)

    def checkpoint(self) -> list[str]:
        """Write every record changed since the last checkpoint; return those that failed to
        encode (they go back to their last encoded bytes)."""
        failed = []
        pending = self._pending
        for stream_id, record in self._stale.items():
            try:
                pending[stream_id] = record.encode(exact=False)
            except Exception:
                log.exception("the state of %r could not be encoded; it is rolled back", stream_id)
                self._live.pop(stream_id, None)
                failed.append(stream_id)
        self._stale.clear()
        store = self.store
        for stream_id, raw in pending.items():
            if raw is None:
                store.delete(stream_id)
            else:
                store.set(stream_id, raw)
        pending.clear()
        return failed

    def dirty(self) -> bool:
        """Transactional: whether a change waits for the next checkpoint."""
        return bool(self._stale or self._pending)

    def changed(self) -> Iterator[tuple[str, Record | None]]:
        """Transactional: every stream changed since the last checkpoint, with its record as
        the checkpoint will write it (None: deleted); unreadable ones are left out."""
        stale, pending = self._stale, self._pending
        yield from stale.items()
        for stream_id, raw in pending.items():
            if stream_id in stale:
                continue
            if raw is None:
                yield stream_id, None
                continue
            record = self._live.get(stream_id)
            if record is None:
                try:
                    record = self.decode(stream_id, raw)
                except InvalidInput:
                    continue
            yield stream_id, record

    def scan(
        self, owned: Callable[[str], bool], whole: bool = True
    ) -> Iterator[tuple[str, Summary | None, Record | None]]:
        """Every stored stream that `owned` accepts, read afresh from the store, with its
        summary (None: unreadable) and its record; changes not yet written are seen as they
        will be written. With `whole=False` a record is decoded (and cached) while the cache
        has room, and past that only where its stored summary does not do
        (streams.coordinator.record.stored_summary), its record then None: a rebuild of a
        million streams decodes as many states as it can hold, not all of them."""
        seen: set[str] = set()
        if self.transactional:
            for stream_id in [*self._stale, *self._pending]:
                if stream_id in seen or not owned(stream_id):
                    continue
                seen.add(stream_id)
                try:
                    record = self.peek(stream_id)
                except InvalidInput:
                    yield stream_id, None, None
                    continue
                if record is not None:
                    yield stream_id, summary_of(record.state), record
        for stream_id, raw in self.store.items():
            if stream_id in seen or not owned(stream_id):
                continue
            self.discard(stream_id)  # another coordinator may have changed it
            if not whole and len(self._live) >= self._cache_size:
                summary = stored_summary(raw)
                if summary is not None:
                    yield stream_id, summary, None
                    continue
            try:
                record = self.decode(stream_id, raw)
            except InvalidInput:
                yield stream_id, None, None
                continue
            if self.transactional:
                self._remember_live(stream_id, record)
            else:
                self._remember(stream_id, raw, record)
            yield stream_id, summary_of(record.state), record

    def forget(self, owned: Callable[[str], bool]) -> None:
        """Drop everything in memory about the streams `owned` accepts (their partitions went)."""
        for held in (self._cache, self._live, self._stale, self._pending):
            for stream_id in [s for s in held if owned(s)]:
                del held[stream_id]

    def reset(self) -> None:
        """Forget everything in memory; the store is the truth again."""
        self._cache.clear()
        self._live.clear()
        self._stale.clear()
        self._pending.clear()

    @staticmethod
    def decode(stream_id: str, raw: bytes) -> Record:
        try:
            return Record.decode(raw)
        except Exception as exc:  # whatever the bytes are, the coordinator goes on
            log.error("unreadable state for stream %r, left alone: %s", stream_id, exc)
            raise InvalidInput("state", f"the stored state of {stream_id!r} is unreadable") from exc

    def _remember(self, stream_id: str, raw: bytes, record: Record) -> None:
        cache = self._cache
        cache[stream_id] = (raw, record)
        cache.move_to_end(stream_id)
        if len(cache) > self._cache_size:
            cache.popitem(last=False)

    def _remember_live(self, stream_id: str, record: Record) -> None:
        live = self._live
        live[stream_id] = record
        live.move_to_end(stream_id)
        if len(live) > self._cache_size:
            # A changed record is also held by _stale, so evicting it loses nothing.
            live.popitem(last=False)
