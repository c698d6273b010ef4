"""The input path's isolation: an input that raises while handling its stream is rejected with a
reason and touches no other stream; a delete works whatever bytes are stored."""

from __future__ import annotations

import pytest

from streams.coordinator.record import Record

from .fakes import T0, Driver, ack, at
from .test_ownership import NEIGHBOUR, SID, with_failing_emitter

BOTH_ENGINES = pytest.mark.parametrize("transactional", [False, True], ids=["faust", "confluent"])


@BOTH_ENGINES
def test_an_input_that_raises_is_rejected_and_its_stream_is_as_before(transactional: bool) -> None:
    d = Driver(transactional=transactional)
    d.assign(SID)
    d.upsert(SID, at(10, 5), max_in_flight=2)
    d.upsert(NEIGHBOUR, at(10, 5))
    first, _, neighbour = d.tasks()
    before = d.store.snapshot()
    emitter = with_failing_emitter(d)
    emitter.fails = lambda topic, key: topic == "tidemark.tasks" and key == SID.encode()

    d.result(ack(first), at(10, 5, 1))  # its commit is built, then the next task fails
    (rejected,) = d.rejected()
    assert rejected["reason"] == (
        "internal: handling it failed (ValueError: message for b'cluster-a' is too large)"
    )
    assert d.commits() == [] and d.store.snapshot() == before
    assert d.processor.stats["stream_errors"] == 1

    d.result(ack(neighbour), at(10, 5, 2))  # another stream of the partition: unaffected
    assert [c["stream_id"] for c in d.commits()] == [NEIGHBOUR]

    emitter.fails = lambda topic, key: False
    d.result(ack(first), at(10, 5, 3))  # the same input again decides as the first time
    assert [c["stream_id"] for c in d.commits()] == [NEIGHBOUR, SID]
    assert [(t["stream_id"], t["start_ms"], t["attempt"]) for t in d.tasks()] == [
        (NEIGHBOUR, at(10, 1), 1),
        (SID, at(10, 2), 1),
    ]


@BOTH_ENGINES
@pytest.mark.parametrize(
    "stored",
    [
        b"\x00 not a record",
        b'{"s": {"v": 1}}',
        b'{"s": {"v": 99}}',
        b"[1, 2, 3]",
    ],
    ids=["bytes", "missing-fields", "future-schema", "not-an-object"],
)
def test_a_delete_works_whatever_bytes_are_stored(transactional: bool, stored: bytes) -> None:
    d = Driver(transactional=transactional)
    d.assign(SID)
    d.upsert(SID, at(10, 5))
    d.store.data[SID] = stored
    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 5, 1))

    again.control({"type": "delete", "stream_id": SID}, at(10, 5, 2))
    assert again.rejected() == [] and SID not in again.store.data
    again.upsert(SID, at(10, 6))  # and the stream can be created again
    assert [t["start_ms"] for t in again.tasks()] == [T0]


@BOTH_ENGINES
def test_a_delete_works_when_the_stored_state_names_another_stream(transactional: bool) -> None:
    d = Driver(transactional=transactional)
    d.assign(SID)
    d.upsert(SID, at(10, 5))
    d.upsert(NEIGHBOUR, at(10, 5))
    d.store.data[SID] = d.store.data[NEIGHBOUR]  # readable, but not cluster-a's
    again = d.restart()
    again.assign(SID)

    again.control({"type": "delete", "stream_id": SID}, at(10, 5, 2))
    assert again.rejected() == [] and SID not in again.store.data
    assert Record.decode(again.store.data[NEIGHBOUR]).state.config.stream_id == NEIGHBOUR


def test_a_delete_of_a_stream_never_stored_is_still_rejected() -> None:
    d = Driver()
    d.control({"type": "delete", "stream_id": SID}, at(10, 5))
    (rejected,) = d.rejected()
    assert rejected["reason"] == "unknown stream"  # as the core says it
