"""The records in memory (streams/coordinator/records.py): a bounded cache over the store."""

from __future__ import annotations

import pytest

from streams.coordinator.record import Record
from streams.coordinator.records import Records
from streams.core import StreamConfig, create_state

from .fakes import T0, InMemoryStore

SIZE = 10


def _record(stream_id: str) -> Record:
    state = create_state(StreamConfig(stream_id, T0), T0).state
    assert state is not None
    return Record.new(state)


def _held(records: Records) -> int:
    return len(records._live) + len(records._cache)


@pytest.mark.parametrize("transactional", [False, True], ids=["faust", "eos"])
def test_the_cache_holds_at_most_its_size_however_many_records_are_saved(
    transactional: bool,
) -> None:
    store = InMemoryStore()
    records = Records(store, transactional, cache_size=SIZE)
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
    records = Records(store, True, cache_size=SIZE)
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
    records = Records(store, True, cache_size=2)
    for sid in ("a", "b"):
        records.save(sid, _record(sid), None)
    records.checkpoint()
    a = records.load("a")  # used: "b" is now the oldest
    records.save("c", _record("c"), None)
    assert list(records._live) == ["a", "c"]
    assert records.load("a") is a
