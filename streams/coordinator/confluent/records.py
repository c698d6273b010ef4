"""The confluent engine's records: changed in memory, encoded into the transaction's buffer.

The Processor is the only writer of its store between resets, so the cache is the truth. A
changed record is held as it is (`_stale`) and encoded only before the stream's next event (its
restore point, should that event fail) and at checkpoint. Its bytes go straight into the open
transaction's write-back buffer (the `StateStore` given: rocks.StoreView, whose writes wait in
TransactionalState until the commit), the one buffer the changelog and RocksDB are written from.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator

from streams.coordinator.ports import StateStore
from streams.coordinator.record import Record, Summary, summary_of
from streams.coordinator.records import RECORD_CACHE_SIZE, decode, scan_stored
from streams.errors import InvalidInput

log = logging.getLogger("streams.coordinator")


class TransactionRecords:
    decode = staticmethod(decode)

    def __init__(self, store: StateStore, cache_size: int = RECORD_CACHE_SIZE) -> None:
        self.store = store
        self._cache_size = cache_size
        # Decoded records (at most `cache_size`: a record changed since its last encode is held
        # by `_stale` as well, so evicting it loses nothing); those changed since their last
        # encode; and, in order, the streams written to the buffer since the last checkpoint.
        self._live: OrderedDict[str, Record] = OrderedDict()
        self._stale: dict[str, Record] = {}
        self._written: dict[str, None] = {}

    def load(self, stream_id: str) -> Record | None:
        """The stream's record, or None if it has none (raises InvalidInput if unreadable)."""
        record = self._stale.pop(stream_id, None)
        if record is not None:
            # The restore point before this event: `discard` goes back to it.
            self.store.set(stream_id, record.encode(exact=False))
            self._written[stream_id] = None
            self._remember_live(stream_id, record)
            return record
        live = self._live
        record = live.get(stream_id)
        if record is not None:
            live.move_to_end(stream_id)
            return record
        raw = self.store.get(stream_id)  # the buffer first, then the committed store
        if raw is None:
            return None
        record = self.decode(stream_id, raw)
        self._remember_live(stream_id, record)
        return record

    def peek(self, stream_id: str) -> Record | None:
        """Like `load`, without making a restore point (for changes that cannot fail halfway)."""
        record = self._stale.get(stream_id)
        if record is not None:
            return record
        return self.load(stream_id)

    def exists(self, stream_id: str) -> bool:
        """Whether anything, readable or not, is stored for the stream."""
        if stream_id in self._live or stream_id in self._stale:
            return True
        return self.store.get(stream_id) is not None

    def encode(self, record: Record) -> bytes | None:
        """None: the record is encoded at checkpoint (or at its stream's next event)."""
        return None

    def save(self, stream_id: str, record: Record, encoded: bytes | None) -> None:
        self._stale[stream_id] = record
        if self._live.get(stream_id) is not record:  # else `load` just moved it to the end
            self._remember_live(stream_id, record)

    def delete(self, stream_id: str) -> None:
        self._stale.pop(stream_id, None)
        self._live.pop(stream_id, None)
        self.store.delete(stream_id)
        self._written[stream_id] = None

    def discard(self, stream_id: str) -> None:
        """Forget the in-memory record (an event failed halfway): the next load goes back to
        the last encoded one, from before that event."""
        self._live.pop(stream_id, None)
        self._stale.pop(stream_id, None)

    def checkpoint(self) -> list[str]:
        """Encode every record changed since its last encode into the buffer; return those that
        failed to encode (they go back to their last encoded bytes)."""
        failed = []
        put = self.store.set
        for stream_id, record in self._stale.items():
            try:
                raw = record.encode(exact=False)
            except Exception:
                log.exception("the state of %r could not be encoded; it is rolled back", stream_id)
                self._live.pop(stream_id, None)
                failed.append(stream_id)
                continue
            put(stream_id, raw)
        self._stale.clear()
        self._written.clear()
        return failed

    def dirty(self) -> bool:
        """Whether a change waits for the next checkpoint."""
        return bool(self._stale or self._written)

    def changed(self) -> Iterator[tuple[str, Record | None]]:
        """Every stream changed since the last checkpoint, with its record as the checkpoint
        will write it (None: deleted); unreadable ones are left out."""
        stale = self._stale
        yield from stale.items()
        for stream_id in self._written:
            if stream_id in stale:
                continue
            record = self._live.get(stream_id)
            if record is None:
                raw = self.store.get(stream_id)
                if raw is None:
                    yield stream_id, None
                    continue
                try:
                    record = self.decode(stream_id, raw)
                except InvalidInput:
                    continue
            yield stream_id, record

    def scan(
        self, owned: Callable[[str], bool], whole: bool = False
    ) -> Iterator[tuple[str, Summary | None, Record | None]]:
        """Every stored stream that `owned` accepts (see records.WriteThroughRecords.scan);
        changes not yet encoded are seen as they will be written. Not `whole` by default:
        records past what the cache holds are indexed from their stored summaries (nothing
        needs them decoded at a rebuild)."""
        seen: set[str] = set()
        for stream_id in [*self._stale, *self._written]:
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
        yield from scan_stored(
            self.store.items(),
            self.decode,
            lambda stream_id: stream_id in seen or not owned(stream_id),
            self.discard,
            lambda: whole or len(self._live) < self._cache_size,
            lambda stream_id, raw, record: self._remember_live(stream_id, record),
        )

    def forget(self, owned: Callable[[str], bool]) -> None:
        """Drop everything in memory about the streams `owned` accepts (their partitions went;
        the engine drops their buffered writes with their stores)."""
        for held in (self._live, self._stale, self._written):
            for stream_id in [s for s in held if owned(s)]:
                del held[stream_id]

    def reset(self) -> None:
        """Forget everything in memory (the engine dropped the buffer): the store is the truth."""
        self._live.clear()
        self._stale.clear()
        self._written.clear()

    def _remember_live(self, stream_id: str, record: Record) -> None:
        live = self._live
        live[stream_id] = record
        live.move_to_end(stream_id)
        if len(live) > self._cache_size:
            # A changed record is also held by _stale, so evicting it loses nothing.
            live.popitem(last=False)
