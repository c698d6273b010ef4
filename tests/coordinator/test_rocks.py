"""The confluent engine's store: RocksDB holds committed state only, with its changelog offset."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from streams.coordinator.confluent.rocks import (
    MEMTABLES_BYTES,
    REPLAYS,
    STREAMS,
    PartitionStore,
    TransactionalState,
)
from streams.coordinator.store_history import StoreMark


def _state(tmp_path: Path) -> TransactionalState:
    """Stores of partitions 0 and 1, restored from an empty changelog as an engine opens them."""
    state = TransactionalState(tmp_path, lambda s: 0 if s.startswith("a") else 1)
    state.restore(_Changelog({}), [0, 1])
    return state


def test_writes_wait_in_memory_until_the_transaction_commits(tmp_path: Path) -> None:
    state = _state(tmp_path)
    streams = state.view(STREAMS)
    streams.set("a1", b"one")
    assert streams.get("a1") == b"one"  # the open transaction reads its own writes
    assert state.stores[0].get(STREAMS + b"a1") is None  # RocksDB does not have it yet
    assert list(state.pending()) == [(0, b"sa1", b"one")]
    state.persist({0: 41})
    assert state.stores[0].get(STREAMS + b"a1") == b"one"
    assert state.stores[0].offset == 41
    assert list(state.pending()) == []


def test_an_abort_drops_the_open_transaction_and_keeps_what_was_committed(tmp_path: Path) -> None:
    state = _state(tmp_path)
    streams = state.view(STREAMS)
    streams.set("a1", b"committed")
    state.persist({0: 7})
    streams.set("a1", b"uncommitted")
    streams.delete("a1")
    assert streams.get("a1") is None
    state.abort()
    assert streams.get("a1") == b"committed"
    assert state.stores[0].offset == 7


def test_data_and_offset_survive_a_reopen_together(tmp_path: Path) -> None:
    state = _state(tmp_path)
    state.view(STREAMS).set("b1", b"x")
    state.persist({1: 3})
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
    state.persist({0: 1, 1: 1})
    streams.set("a2", b"3")  # open
    streams.delete("b1")  # open
    assert sorted(streams.items()) == [("a1", b"1"), ("a2", b"3")]
    assert list(replays.items()) == [("a1", b"r")]


Entry = tuple[int, bytes, bytes | None]
DAY_MS = 86_400_000  # delete.retention.ms by default


class _Changelog:
    """A changelog in memory: each partition's records (offset, key, value) from offset 0, of
    one history (its topic id), keeping tombstones `tombstones_kept_ms` (delete.retention.ms)."""

    topic = "changelog"

    def __init__(
        self,
        records: dict[int, list[Entry]],
        history: str = "history-1",
        tombstones_kept_ms: int = DAY_MS,
    ) -> None:
        self.records = records
        self.history = history
        self.tombstones_kept_ms = tombstones_kept_ms
        self.starts: dict[int, int] = {}

    def resume_at(self, partition: int, stored_offset: int) -> int | None:
        start = stored_offset + 1
        records = self.records.get(partition, [])
        return None if start > (records[-1][0] + 1 if records else 0) else start

    def read(self, starts: dict[int, int]) -> Iterator[tuple[int, list[Entry]]]:
        self.starts = dict(starts)
        for partition, start in starts.items():
            entries = [e for e in self.records.get(partition, []) if e[0] >= start]
            if entries:
                yield partition, entries


def test_a_restore_replays_the_changelog_from_the_offset_the_store_holds(tmp_path: Path) -> None:
    state = _state(tmp_path)
    state.view(STREAMS).set("a1", b"old")
    state.persist({0: 1})  # the store holds the changelog up to offset 1
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
    state.persist({0: 9})
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
        state.persist({0: batch, 1: batch})
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
from streams.coordinator.confluent.rocks import PartitionStore
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


# -- a store trusted only by the history it reflects ------------------------------------------


class _Clock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def _restored(
    folder: Path, changelog: _Changelog, clock: _Clock | None = None
) -> TransactionalState:
    """A fresh process's state of partition 0, restored from `changelog`."""
    if clock is None:
        state = TransactionalState(folder, lambda s: 0)
    else:
        state = TransactionalState(folder, lambda s: 0, clock=clock)
    state.restore(changelog, [0])
    return state


def test_a_store_of_a_re_created_changelog_is_restored_whole_though_the_topic_grew_past_it(
    tmp_path: Path,
) -> None:
    """The new history's offsets pass an offset check; its topic id does not match."""
    first = _Changelog({0: [(0, b"sa1", b"old"), (1, b"sa2", b"old")]}, history="first")
    _restored(tmp_path, first).close_all()  # the store holds history "first" up to offset 1
    second = _Changelog(
        {0: [(0, b"sa2", b"new"), (1, b"sa3", b"x"), (2, b"sa3", b"y")]}, history="second"
    )
    state = _restored(tmp_path, second)
    assert second.starts == {0: 0}
    streams = state.view(STREAMS)
    assert (streams.get("a1"), streams.get("a2"), streams.get("a3")) == (None, b"new", b"y")
    assert state.stores[0].mark.history == "second" and state.stores[0].offset == 2
    state.close_all()
    # and once it holds the new history, it goes on from where it is
    second.records[0].append((3, b"sa4", b"z"))
    state = _restored(tmp_path, second)
    assert second.starts == {0: 3} and state.view(STREAMS).get("a2") == b"new"


def test_a_store_older_than_the_changelog_can_prove_is_restored_whole(tmp_path: Path) -> None:
    """A tombstone written after the store's offset is kept only delete.retention.ms: after
    that, compaction may have removed it, and the deleted key would come back."""
    log: list[Entry] = [(0, b"sa1", b"1"), (1, b"sa2", b"2")]
    young, old = tmp_path / "young", tmp_path / "old"
    for folder in (young, old):  # each at offset 1, dated 1_000_000
        _restored(folder, _Changelog({0: log}), _Clock(1_000_000)).close_all()
    # Another owner then deleted a1 (offset 2) and wrote a3 (offset 3).
    whole = _Changelog({0: [*log, (2, b"sa1", None), (3, b"sa3", b"3")]})
    state = _restored(young, whole, _Clock(1_000_000 + DAY_MS // 2 - 1))
    assert whole.starts == {0: 2}  # young enough: every tombstone after offset 1 is still there
    assert state.view(STREAMS).get("a1") is None
    # Half of delete.retention.ms later, no longer provable; and compaction did remove it.
    clock = _Clock(1_000_000 + DAY_MS // 2)
    compacted = _Changelog({0: [(1, b"sa2", b"2"), (3, b"sa3", b"3")]})
    state = _restored(old, compacted, clock)
    assert compacted.starts == {0: 0}
    streams = state.view(STREAMS)
    assert (streams.get("a1"), streams.get("a2"), streams.get("a3")) == (None, b"2", b"3")
    assert state.stores[0].mark.since_ms == clock.now_ms  # the restore read to the end now


def test_the_retention_of_the_changelog_itself_sets_the_bound(tmp_path: Path) -> None:
    """Half of the topic's own delete.retention.ms, counted from the last time the store was
    known to hold the changelog to its end (here: each restore)."""
    clock = _Clock(5_000)
    log = {0: [(0, b"sa1", b"1")]}

    def restore_starts() -> dict[int, int]:
        changelog = _Changelog(log, tombstones_kept_ms=1_000)
        _restored(tmp_path, changelog, clock).close_all()
        return changelog.starts

    assert restore_starts() == {0: 0}  # the store is dated 5_000
    clock.now_ms += 499
    assert restore_starts() == {0: 1}  # and now 5_499
    clock.now_ms += 499
    assert restore_starts() == {0: 1}
    clock.now_ms += 500
    assert restore_starts() == {0: 0}


def test_a_committed_write_is_dated_from_before_its_changelog_records(tmp_path: Path) -> None:
    """The time kept with an offset is when its transaction began writing: every record after
    that offset was appended later, however long the commit itself took."""
    clock = _Clock(10_000)
    state = _restored(tmp_path, _Changelog({}), clock)
    clock.now_ms = 20_000
    state.view(STREAMS).set("a1", b"x")  # the transaction's first write
    clock.now_ms = 30_000
    state.view(STREAMS).set("a2", b"y")
    clock.now_ms = 40_000  # the commit, and the RocksDB write after it
    state.persist({0: 7})
    assert state.stores[0].mark == StoreMark("history-1", 7, 20_000)
    clock.now_ms = 50_000
    state.view(STREAMS).set("a1", b"z")
    state.abort()  # an aborted transaction dates nothing
    clock.now_ms = 60_000
    state.view(STREAMS).set("a2", b"w")
    state.persist({0: 9})
    assert state.stores[0].mark == StoreMark("history-1", 9, 60_000)


def test_a_store_that_records_no_history_is_restored_whole(tmp_path: Path) -> None:
    """A store written before stores recorded their changelog: its offset proves nothing."""
    store = PartitionStore(tmp_path / "partition-0")
    store.write([(b"sa1", b"stale")], 1)
    store.close()
    changelog = _Changelog({0: [(0, b"sa2", b"2"), (1, b"sa2", b"3"), (2, b"sa3", b"4")]})
    state = _restored(tmp_path, changelog)
    assert changelog.starts == {0: 0} and state.view(STREAMS).get("a1") is None


# -- stores of revoked partitions are deleted after a delay -----------------------------------


def test_the_store_of_a_revoked_partition_is_deleted_after_the_cleanup_delay(
    tmp_path: Path,
) -> None:
    clock = _Clock(0)
    state = TransactionalState(tmp_path, _partition, clock=clock, cleanup_delay_ms=600_000)
    state.restore(_Changelog({}), [0, 1, 2])
    state.close(1)
    state.close(2)
    clock.now_ms = 100_000
    state.restore(_Changelog({}), [2])  # given back within the delay: kept, and not deleted
    assert state.tidy(599_999) == []
    assert state.tidy(600_000) == [1]
    assert not (tmp_path / "partition-1").exists()
    assert (tmp_path / "partition-0").exists() and (tmp_path / "partition-2").exists()
    assert state.tidy(10_000_000) == []  # owned stores stay
    state.close_all()


def test_stores_found_on_disk_count_as_released_when_the_process_starts(tmp_path: Path) -> None:
    """After a restart the partitions not given back are not this process's any more."""
    first = TransactionalState(tmp_path, _partition)
    first.restore(_Changelog({}), [0, 1])
    first.close_all()
    clock = _Clock(1_000)
    state = TransactionalState(tmp_path, _partition, clock=clock, cleanup_delay_ms=5_000)
    state.restore(_Changelog({}), [0])
    assert state.tidy(5_999) == []
    assert state.tidy(6_000) == [1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["partition-0"]
    state.close_all()


def _partition(stream_id: str) -> int:
    return int(stream_id[0])


def test_released_stores_dated_anew_are_kept_for_another_cleanup_delay(tmp_path: Path) -> None:
    """After a wait for the brokers with every partition released
    (streams.coordinator.confluent.renewal), the cleanup delay counts from the renewal, not
    from the release."""
    clock = [1_000]
    state = TransactionalState(
        tmp_path, lambda s: 0, clock=lambda: clock[0], cleanup_delay_ms=600_000
    )
    state.open(0)
    state.close(0)  # released at 1_000
    state.date_released(1_000 + 900_000)  # renewed after a 15 min outage
    assert state.tidy(1_000 + 900_000 + 10_000) == []
    assert state.tidy(1_000 + 900_000 + 600_000) == [0]
