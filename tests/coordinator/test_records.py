"""The records in memory (streams/coordinator/records.py): a bounded cache over the store."""

from __future__ import annotations

from typing import Any

import pytest

from streams.coordinator.confluent.records import TransactionRecords
from streams.coordinator.faust.records import WriteThroughRecords
from streams.coordinator.record import Record
from streams.coordinator.records import Records
from streams.core import StreamConfig, create_state

from .fakes import T0, InMemoryStore

SIZE = 10


def _record(stream_id: str) -> Record:
    state = create_state(StreamConfig(stream_id, T0), T0).state
    assert state is not None
    return Record.new(state)


def _records(store: InMemoryStore, transactional: bool, cache_size: int) -> Any:
    if transactional:
        return TransactionRecords(store, cache_size)
    return WriteThroughRecords(store, cache_size)


def _held(records: Records) -> int:
    return len(getattr(records, "_live", ())) + len(getattr(records, "_cache", ()))


@pytest.mark.parametrize("transactional", [False, True], ids=["faust", "confluent"])
def test_the_cache_holds_at_most_its_size_however_many_records_are_saved(
    transactional: bool,
) -> None:
    store = InMemoryStore()
    records = _records(store, transactional, cache_size=SIZE)
    for i in range(10 * SIZE):
        sid = f"s-{i}"
        record = _record(sid)
        records.save(sid, record, None if transactional else record.encode())
        if transactional and i % 7 == 6:
            records.checkpoint()
        assert _held(records) <= SIZE
    records.checkpoint()
    assert _held(records) <= SIZE
    # Nothing evicted is lost: every record reads back from the store as it was saved.
    for i in range(10 * SIZE):
        loaded = records.load(f"s-{i}")
        assert loaded is not None and loaded.state.config.stream_id == f"s-{i}"
    assert len(store.data) == 10 * SIZE


def test_a_changed_record_evicted_before_the_checkpoint_is_still_written() -> None:
    store = InMemoryStore()
    records = TransactionRecords(store, cache_size=SIZE)
    first = _record("first")
    records.save("first", first, None)
    for i in range(3 * SIZE):  # pushes "first" out of the cache before any checkpoint
        records.save(f"s-{i}", _record(f"s-{i}"), None)
    assert "first" not in records._live
    assert records.peek("first") is first  # still the changed record, not a stored one
    records.checkpoint()
    assert store.data["first"] == first.encode()


def test_the_least_recently_used_record_goes_first() -> None:
    store = InMemoryStore()
    records = TransactionRecords(store, cache_size=2)
    for sid in ("a", "b"):
        records.save(sid, _record(sid), None)
    records.checkpoint()
    a = records.load("a")  # used: "b" is now the oldest
    records.save("c", _record("c"), None)
    assert list(records._live) == ["a", "c"]
    assert records.load("a") is a


def test_a_change_waits_in_the_transactions_buffer_only() -> None:
    """Confluent: a record's bytes are written to the store it is given (the open transaction's
    write-back buffer, which the changelog and RocksDB are written from), not held a second
    time: its restore point is there as soon as it is made, and a failed event goes back to
    it from there."""
    store = InMemoryStore()
    store.buffer = {}  # the transaction's buffer: nothing reaches `data` before a commit
    records = TransactionRecords(store, cache_size=SIZE)
    record = _record("a")
    records.save("a", record, None)
    assert store.buffer == {}  # changed in memory, not encoded yet
    before = record.encode(exact=False)
    assert records.load("a") is record  # its next event: the restore point is made
    assert store.buffer == {"a": before}
    record.bypasses += 1  # the event changes it, then fails halfway
    records.discard("a")
    again = records.load("a")
    assert again is not None and again.bypasses == 0 and again is not record
    records.save("a", again, None)
    again.bypasses = 5
    records.checkpoint()
    assert store.buffer == {"a": again.encode(exact=False)} and store.data == {}
    records.delete("a")
    assert store.buffer == {"a": None} and records.dirty()
