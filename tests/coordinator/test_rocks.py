"""The confluent engine's store: RocksDB holds committed state only, with its changelog offset."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from streams.coordinator.rocks import (
    MEMTABLES_BYTES,
    REPLAYS,
    STREAMS,
    PartitionStore,
    TransactionalState,
)


def _state(tmp_path: Path) -> TransactionalState:
    state = TransactionalState(tmp_path, lambda s: 0 if s.startswith("a") else 1)
    state.open(0)
    state.open(1)
    return state


def test_writes_wait_in_memory_until_the_transaction_commits(tmp_path: Path) -> None:
    state = _state(tmp_path)
    streams = state.view(STREAMS)
    streams.set("a1", b"one")
    assert streams.get("a1") == b"one"  # the open transaction reads its own writes
    assert state.stores[0].get(STREAMS + b"a1") is None  # RocksDB does not have it yet
    assert list(state.pending()) == [(0, b"sa1", b"one")]
    state.committed({0: 41})
    assert state.stores[0].get(STREAMS + b"a1") == b"one"
    assert state.stores[0].offset == 41
    assert list(state.pending()) == []


def test_an_abort_drops_the_open_transaction_and_keeps_what_was_committed(tmp_path: Path) -> None:
    state = _state(tmp_path)
    streams = state.view(STREAMS)
    streams.set("a1", b"committed")
    state.committed({0: 7})
    streams.set("a1", b"uncommitted")
    streams.delete("a1")
    assert streams.get("a1") is None
    state.abort()
    assert streams.get("a1") == b"committed"
    assert state.stores[0].offset == 7


def test_data_and_offset_survive_a_reopen_together(tmp_path: Path) -> None:
    state = _state(tmp_path)
    state.view(STREAMS).set("b1", b"x")
    state.committed({1: 3})
    state.close_all()
    reopened = PartitionStore(tmp_path / "partition-1")
    assert (reopened.get(STREAMS + b"b1"), reopened.offset) == (b"x", 3)
    reopened.close()


def test_tables_are_apart_and_items_merge_the_open_transaction(tmp_path: Path) -> None:
    state = _state(tmp_path)
    streams, replays = state.view(STREAMS), state.view(REPLAYS)
    streams.set("a1", b"1")
    streams.set("b1", b"2")
    replays.set("a1", b"r")
    state.committed({0: 1, 1: 1})
    streams.set("a2", b"3")  # open
    streams.delete("b1")  # open
    assert sorted(streams.items()) == [("a1", b"1"), ("a2", b"3")]
    assert list(replays.items()) == [("a1", b"r")]


Entry = tuple[int, bytes, bytes | None]


class _Changelog:
    """A changelog in memory: each partition's records (offset, key, value) from offset 0."""

    topic = "changelog"

    def __init__(self, records: dict[int, list[Entry]]) -> None:
        self.records = records
        self.starts: dict[int, int] = {}

    def resume_at(self, partition: int, stored_offset: int) -> int | None:
        start = stored_offset + 1
        return None if start > len(self.records.get(partition, [])) else start

    def read(self, starts: dict[int, int]) -> Iterator[tuple[int, list[Entry]]]:
        self.starts = dict(starts)
        for partition, start in starts.items():
            entries = [e for e in self.records.get(partition, []) if e[0] >= start]
            if entries:
                yield partition, entries


def test_a_restore_replays_the_changelog_from_the_offset_the_store_holds(tmp_path: Path) -> None:
    state = _state(tmp_path)
    state.view(STREAMS).set("a1", b"old")
    state.committed({0: 1})  # the store holds the changelog up to offset 1
    changelog = _Changelog({0: [(0, b"sa1", b"0"), (1, b"sa1", b"old"), (2, b"sa1", b"new"),
                                (3, b"sa2", b"2"), (4, b"sa2", None)]})  # fmt: skip
    assert state.restore(changelog, [0]) == 3
    assert changelog.starts == {0: 2}
    assert state.view(STREAMS).get("a1") == b"new" and state.view(STREAMS).get("a2") is None
    assert state.stores[0].offset == 4


def test_a_store_of_another_history_is_wiped_and_restored_whole(tmp_path: Path) -> None:
    """A store ahead of the changelog's end (the topic was re-created) is not trusted."""
    state = _state(tmp_path)
    state.view(STREAMS).set("a1", b"stale")
    state.committed({0: 9})
    changelog = _Changelog({0: [(0, b"sa2", b"2")]})
    assert state.restore(changelog, [0]) == 1
    assert changelog.starts == {0: 0}
    assert state.view(STREAMS).get("a1") is None and state.view(STREAMS).get("a2") == b"2"
    assert state.stores[0].offset == 0


def test_the_memtables_of_every_store_stay_within_one_budget(tmp_path: Path) -> None:
    """100 MiB written to two stores (RocksDB's default would keep up to 64 MiB of memtables
    per store) leave at most MEMTABLES_BYTES in memtables over both."""
    state = _state(tmp_path)
    streams = state.view(STREAMS)
    value = bytes(1024)
    for batch in range(100):
        for i in range(1000):
            streams.set(f"{'ab'[i % 2]}{batch}-{i}", value)
        state.committed({0: batch, 1: batch})
    held = sum(
        store._db.property_int_value("rocksdb.cur-size-all-mem-tables") or 0
        for store in state.stores.values()
    )
    assert 0 < held <= MEMTABLES_BYTES
    assert state.view(STREAMS).get("a0-0") == value  # flushed, still there


def test_writes_skip_the_write_ahead_log(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "p")
    for offset in range(50):
        store.write(((b"s%d" % i, b"x" * 780) for i in range(100)), offset)
    assert store.get(b"s99") == b"x" * 780 and store.offset == 49
    assert sum(f.stat().st_size for f in (tmp_path / "p").glob("*.log")) == 0
    store.close()


CRASH = """
import os
import sys
from pathlib import Path
from streams.coordinator.rocks import PartitionStore
store = PartitionStore(Path(sys.argv[1]))
store.write([(b"a", b"1"), (b"b", b"1")], 10)
store._db.flush()  # as RocksDB does when a memtable fills up
store.write([(b"a", b"2"), (b"c", b"2")], 20)
os._exit(0)  # killed: no close, the last batch only in memory
"""


def test_a_crash_leaves_an_older_committed_state_with_its_own_offset(tmp_path: Path) -> None:
    """Without a write-ahead log a crash loses the batches not yet flushed, each whole and with
    its offset, so the restore replays the changelog from where the store really is."""
    folder = tmp_path / "p"
    subprocess.run([sys.executable, "-c", CRASH, str(folder)], check=True, timeout=60)
    store = PartitionStore(folder)
    assert (store.offset, store.get(b"a"), store.get(b"b"), store.get(b"c")) == (
        10,
        b"1",
        b"1",
        None,
    )
    store.close()
