"""The exactly-once engine's state: one RocksDB per owned partition, holding committed state only.

Writes of the open transaction wait in memory. Once the transaction commits, they go to the
partition's RocksDB in one batch together with the changelog offset they reflect (the order
KIP-892/KIP-1035 move Kafka Streams to, and Quix Streams' design), so the local store never
holds what Kafka did not commit; a batch lost in a crash loses its offset too, and the restore
replays it. No fsync is needed for that reason, and no write-ahead log either: RocksDB persists
its memtables whole and in order, so after a crash the store is an older committed state with
its own offset, and the restore replays the rest from the changelog. That is at most the
unflushed memtables (MEMTABLES_BYTES) more to replay after a SIGKILL (a clean close flushes
them), for a write a third as long: 1.1-1.3 against 3.3-3.4 µs per 780-byte record, and about
a tenth of the loop's time under load went to these writes (py-spy, docs/benchmarks.md).

A store also records which changelog it reflects (the topic's id) and since when, so that a
restore goes on from its offset only when the changelog can prove that offset
(streams.coordinator.store_history); and the stores of partitions revoked from this process are
deleted after `cleanup_delay_ms`, as Kafka Streams does with `state.cleanup.delay.ms`.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Protocol

from rocksdict import (  # noqa: TID251  (the RocksDB store)
    BlockBasedOptions,
    Cache,
    Options,
    Rdict,
    WriteBatch,
    WriteBufferManager,
    WriteOptions,
)

from streams.clock import now_ms as wall_clock_ms
from streams.coordinator.store_history import CLEANUP_DELAY_MS, StoreMark, distrust

log = logging.getLogger("streams.coordinator")

OFFSET_KEY = b"\x00changelog-offset"
HISTORY_KEY = b"\x00changelog-history"  # the changelog's topic id
SINCE_KEY = b"\x00changelog-since-ms"  # StoreMark.since_ms
FOLDER_PREFIX = "partition-"
STREAMS = b"s"  # key prefixes: one changelog and one store per partition hold both tables
REPLAYS = b"r"

# RocksDB's memory, shared by every partition's store of the process: by default each store
# has memtables of 64 MiB (two while one flushes) and a block cache of its own (8 MiB), which
# at 300,000 registered streams held 186 MiB of memtables over 6 partitions, and up to 768 MiB
# as partitions grow. A load that misses the record cache (streams.coordinator.records) reads
# the store's files, which the OS's page cache keeps outside the process.
WRITE_BUFFER_BYTES = 8 * 1024 * 1024  # per memtable
MEMTABLES_BYTES = 64 * 1024 * 1024  # all memtables of the process (WriteBufferManager)
BLOCK_CACHE_BYTES = 32 * 1024 * 1024
_memtables = WriteBufferManager(MEMTABLES_BYTES, False)
_block_cache = Cache(BLOCK_CACHE_BYTES)


def _options() -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_write_buffer_size(WRITE_BUFFER_BYTES)
    options.set_max_write_buffer_number(2)
    options.set_write_buffer_manager(_memtables)
    table = BlockBasedOptions()
    table.set_block_cache(_block_cache)
    options.set_block_based_table_factory(table)
    return options


class PartitionStore:
    """One partition's committed state, the changelog offset it reflects (-1: none), which
    changelog that is and since when (its StoreMark)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = Rdict(str(path), _options())
        self._no_wal = WriteOptions()
        # A property at run time; rocksdict's stub calls it a method.
        self._no_wal.disable_wal = True  # type: ignore[method-assign, assignment]

    @property
    def offset(self) -> int:
        raw = self._db.get(OFFSET_KEY)
        return -1 if raw is None else int(raw)

    @property
    def mark(self) -> StoreMark:
        history, since = self._db.get(HISTORY_KEY), self._db.get(SINCE_KEY)
        return StoreMark(
            None if history is None else history.decode(),
            self.offset,
            None if since is None else int(since),
        )

    def get(self, key: bytes) -> bytes | None:
        value: bytes | None = self._db.get(key)
        return value

    def write(
        self,
        changes: Iterable[tuple[bytes, bytes | None]],
        offset: int,
        since_ms: int | None = None,
    ) -> None:
        """The changes and the offset they bring the store to, in one batch; with `since_ms`, a
        time no later than the append of any changelog record after `offset`."""
        batch = WriteBatch(raw_mode=True)
        for key, value in changes:
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        batch.put(OFFSET_KEY, str(offset).encode())
        if since_ms is not None:
            batch.put(SINCE_KEY, str(since_ms).encode())
        self._db.write(batch, self._no_wal)

    def adopt(self, history: str) -> None:
        """Record the changelog this (empty or matching) store reflects from now on."""
        self._db.put(HISTORY_KEY, history.encode(), self._no_wal)

    def items(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        for key, value in self._db.items(from_key=prefix):
            assert isinstance(key, bytes)  # raw mode: keys and values are bytes
            if not key.startswith(prefix):
                return
            yield key, value

    def close(self) -> None:
        self._db.close()

    def wipe(self) -> PartitionStore:
        """Delete this store's files and open it again, empty."""
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)
        return PartitionStore(self.path)


class Changelog(Protocol):
    """The changelog as a restore reads it (streams.kafka.changelog.ChangelogReader)."""

    topic: str

    @property
    def history(self) -> str:
        """The topic's id: a changelog deleted and re-created is another history."""
        ...

    @property
    def tombstones_kept_ms(self) -> int:
        """The topic's delete.retention.ms."""
        ...

    def resume_at(self, partition: int, stored_offset: int) -> int | None: ...

    def read(
        self, starts: dict[int, int]
    ) -> Iterator[tuple[int, list[tuple[int, bytes, bytes | None]]]]: ...


class TransactionalState:
    """Committed stores of the owned partitions, plus the open transaction's writes."""

    def __init__(
        self,
        folder: Path,
        partition_of: Callable[[str], int],
        clock: Callable[[], int] = wall_clock_ms,
        cleanup_delay_ms: int = CLEANUP_DELAY_MS,
    ) -> None:
        self.folder = folder
        self.partition_of = partition_of
        self.stores: dict[int, PartitionStore] = {}
        self._dirty: dict[int, dict[bytes, bytes | None]] = {}
        self._clock = clock
        self._began_ms: int | None = None  # the open transaction's first write
        self.cleanup_delay_ms = cleanup_delay_ms
        # Stores on disk that this process does not own, and since when: those found at start
        # count from then (the partitions not given back since are another member's).
        started_ms = clock()
        self._released = {p: started_ms for p in _partitions_on_disk(folder)}

    def open(self, partition: int) -> PartitionStore:
        store = self.stores.get(partition)
        if store is None:
            store = self.stores[partition] = PartitionStore(self._path(partition))
            self._released.pop(partition, None)
        return store

    def _path(self, partition: int) -> Path:
        return self.folder / f"{FOLDER_PREFIX}{partition}"

    def restore(self, changelog: Changelog, partitions: list[int]) -> int:
        """Open the partitions' stores and bring each up to the end of its changelog, from the
        offset it holds when the changelog can prove it (store_history), else from the start
        into an emptied store; return the records applied."""
        began_ms = self._clock()  # before any read: see store_history on `since_ms`
        history, kept_ms = changelog.history, changelog.tombstones_kept_ms
        starts = {}
        for partition in partitions:
            store = self.open(partition)
            mark = store.mark
            why = distrust(mark, history, kept_ms, began_ms)
            start = None if why else changelog.resume_at(partition, mark.offset)
            if start is None:
                why = why or f"its offset {mark.offset} is not in the topic"
                log.warning("partition %d: the local store does not match %s (%s); restoring "
                            "it all", partition, changelog.topic, why)  # fmt: skip
                store = self.stores[partition] = store.wipe()
                start = 0
            if mark.history != history or start == 0:
                store.adopt(history)
            starts[partition] = start
        count = 0
        for partition, entries in changelog.read(starts):
            changes = ((key, value) for _, key, value in entries)
            self.stores[partition].write(changes, entries[-1][0], began_ms)
            count += len(entries)
        # Each store now holds its changelog to the end as it stood after began_ms.
        for partition in starts:
            store = self.stores[partition]
            store.write((), store.offset, began_ms)
        return count

    def close(self, partition: int) -> None:
        self._dirty.pop(partition, None)
        store = self.stores.pop(partition, None)
        if store is not None:
            store.close()
            self._released[partition] = self._clock()

    def date_released(self, now_ms: int) -> None:
        """Count the cleanup delay of every released store from `now_ms`: after the engine
        waited out a broker outage with its partitions released, they are likely to come back."""
        self._released = dict.fromkeys(self._released, now_ms)

    def tidy(self, now_ms: int) -> list[int]:
        """Delete the stores released `cleanup_delay_ms` ago or more; return their partitions."""
        if not self._released:  # the usual case, at every step of the loop
            return []
        due = [p for p, at in self._released.items() if now_ms - at >= self.cleanup_delay_ms]
        for partition in due:
            del self._released[partition]
            shutil.rmtree(self._path(partition), ignore_errors=True)
            log.info("partition %d: the local store, released %d ms ago, is deleted",
                     partition, self.cleanup_delay_ms)  # fmt: skip
        return due

    def close_all(self) -> None:
        for partition in list(self.stores):
            self.close(partition)

    # -- reads and writes of the open transaction -----------------------------------------

    def get(self, partition: int, key: bytes) -> bytes | None:
        dirty = self._dirty.get(partition)
        if dirty is not None and key in dirty:
            return dirty[key]
        store = self.stores.get(partition)
        return None if store is None else store.get(key)

    def put(self, partition: int, key: bytes, value: bytes | None) -> None:
        dirty = self._dirty.get(partition)  # held only for an open store (close drops it)
        if dirty is None:
            if partition not in self.stores:
                raise KeyError(f"partition {partition} is not owned here")
            dirty = self._dirty[partition] = {}
            if self._began_ms is None:
                self._began_ms = self._clock()
        dirty[key] = value

    def items(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        for partition, store in list(self.stores.items()):
            dirty = self._dirty.get(partition, {})
            for key, value in store.items(prefix):
                if key not in dirty:
                    yield key, value
            for key, maybe in list(dirty.items()):
                if maybe is not None and key.startswith(prefix):
                    yield key, maybe

    def pending(self) -> Iterator[tuple[int, bytes, bytes | None]]:
        """Every write of the open transaction: (partition, key, value or None)."""
        for partition, dirty in self._dirty.items():
            for key, value in dirty.items():
                yield partition, key, value

    def pending_by_partition(self) -> Iterator[tuple[int, list[tuple[bytes, bytes | None]]]]:
        """The writes of the open transaction per partition, in the order they were made."""
        for partition, dirty in self._dirty.items():
            if dirty:
                yield partition, list(dirty.items())

    def persist(self, offsets: dict[int, int]) -> None:
        """The transaction committed: persist each partition's changes with its changelog offset,
        dated from the transaction's first write: its changelog records were produced later,
        so any record after its offsets was appended after that time."""
        for partition, dirty in self._dirty.items():
            store = self.stores.get(partition)
            if store is not None and dirty:
                store.write(dirty.items(), offsets[partition], self._began_ms)
        self._dirty = {}
        self._began_ms = None

    def abort(self) -> None:
        self._dirty = {}
        self._began_ms = None

    def view(self, prefix: bytes) -> StoreView:
        return StoreView(self, prefix)


def _partitions_on_disk(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    names = (p.name[len(FOLDER_PREFIX) :] for p in folder.iterdir() if p.is_dir())
    return [int(n) for n in names if n.isdigit()]


class StoreView:
    """The Processor's StateStore port over one table (key prefix) of the transactional state."""

    def __init__(self, state: TransactionalState, prefix: bytes) -> None:
        self._state = state
        self._prefix = prefix
        self._partition_of = state.partition_of

    def get(self, stream_id: str) -> bytes | None:
        return self._state.get(self._partition_of(stream_id), self._prefix + stream_id.encode())

    def set(self, stream_id: str, value: bytes) -> None:
        self._state.put(self._partition_of(stream_id), self._prefix + stream_id.encode(), value)

    def delete(self, stream_id: str) -> None:
        self._state.put(self._partition_of(stream_id), self._prefix + stream_id.encode(), None)

    def items(self) -> Iterable[tuple[str, bytes]]:
        cut = len(self._prefix)
        for key, value in self._state.items(self._prefix):
            yield key[cut:].decode(), value
