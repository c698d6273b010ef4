"""Ownership and time: a partition is rebuilt before any input of it, a tick isolates each
stream, and `reset()` after an aborted transaction rebuilds from the store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from streams.coordinator.health import SourceHealth
from streams.coordinator.processor import RETRY_AFTER_ERROR_MS, TICK_RESEND_MS
from streams.coordinator.record import Record
from streams.core import OutagePolicy

from .fakes import T0, Driver, RecordingEmitter, ack, at, nack

SID = "cluster-a"
NEIGHBOUR = "cluster-k"  # in the same partition as cluster-a
BOTH_ENGINES = pytest.mark.parametrize("transactional", [False, True], ids=["faust", "confluent"])


class FailingEmitter(RecordingEmitter):
    """Raises on sends that `fails` picks, as a producer does for a message too large."""

    def __init__(self) -> None:
        super().__init__()
        self.fails: Callable[[str, bytes], bool] = lambda topic, key: False

    def send(self, topic: str, key: bytes, value: bytes, *callbacks: Any) -> None:
        if self.fails(topic, key):
            raise ValueError(f"message for {key!r} is too large")
        super().send(topic, key, value, *callbacks)


def with_failing_emitter(d: Driver) -> FailingEmitter:
    emitter = FailingEmitter()
    d.emitter = emitter
    processor = d.processor
    for part in (processor, processor._announcer, processor._inputs):
        part.emitter = emitter
    return emitter


def test_a_new_owner_announces_the_outbox_before_it_handles_a_result() -> None:
    d = Driver(flush_ms=0)
    d.assign(SID)
    d.upsert(SID, at(10, 5), max_in_flight=3)
    first, second, _ = d.tasks()
    d.result(ack(first), at(10, 5, 1))  # announced, never confirmed: the process dies

    again = d.restart()
    again.assign(SID)
    again.result(ack(second), at(10, 5, 2))  # before any tick of the partition
    commits = again.commits()
    assert [(c["previous_ms"], c["downstream_ms"]) for c in commits] == [
        (T0, at(10, 1)),  # the outbox, announced again first: no gap for a consumer at T0
        (at(10, 1), at(10, 2)),
    ]
    assert again.processor.stats["reannounced"] == 1


def test_a_replay_result_before_the_first_tick_finds_the_replay_lane_rebuilt() -> None:
    d = Driver()
    d.assign(SID)
    d.upsert(SID, at(10, 0, 30), non_retryable=["bad"])
    d.tick(at(10, 1))
    (task,) = d.tasks()
    d.result({**ack(task), "outcome": "nack", "error": {"kind": "bad"}}, at(10, 1, 5))
    d.control({"type": "replay", "stream_id": SID, "from_ms": T0, "to_ms": at(10, 1)}, at(10, 2))
    (replay,) = [t for t in d.tasks() if t.get("replay")]

    again = d.restart()
    again.assign(SID)
    again.result(ack(replay), at(10, 2, 1))  # no tick yet
    assert again.processor.stats["replayed"] == 1 and again.processor.stats["duplicate"] == 0
    assert [c["windows"][0]["reason"] for c in again.commits()][-1] == "replayed"


@BOTH_ENGINES
def test_a_stream_that_raises_in_a_tick_is_retried_later_and_its_neighbours_go_on(
    transactional: bool,
) -> None:
    d = Driver(transactional=transactional)
    d.assign(SID)
    d.upsert(SID, at(10, 0, 30))
    d.upsert(NEIGHBOUR, at(10, 0, 30))
    assert d.partition(NEIGHBOUR) == d.partition(SID)
    d.tick(at(10, 0, 30))
    before = d.store.snapshot()
    emitter = with_failing_emitter(d)
    emitter.fails = lambda topic, key: key == SID.encode()

    d.tick(at(10, 1))
    assert [t["stream_id"] for t in d.tasks()] == [NEIGHBOUR]
    assert d.store.data[SID] == before[SID]  # the failed event changed nothing
    assert d.processor.stats["stream_errors"] == 1
    registry = d.processor.metrics.registry
    assert registry.get_sample_value("tidemark_stream_errors_total") == 1
    p = d.partition(SID)
    assert d.processor.index.next_wake_ms(p) == at(10, 1) + RETRY_AFTER_ERROR_MS

    emitter.fails = lambda topic, key: False
    d.tick(at(10, 1) + RETRY_AFTER_ERROR_MS)
    assert [t["stream_id"] for t in d.tasks()] == [NEIGHBOUR, SID]
    assert [t["attempt"] for t in d.tasks()] == [1, 1]


def test_reset_drops_what_was_not_checkpointed_and_rebuilds_before_the_next_input() -> None:
    d = Driver(transactional=True, checkpoint_each=False)
    d.assign(SID)
    d.upsert(SID, at(10, 5), max_in_flight=2)
    d.checkpoint(at(10, 5))
    first, _ = d.tasks()
    committed = d.store.snapshot()
    d.result(ack(first), at(10, 5, 1))  # then the transaction aborts
    assert d.store.snapshot() == committed

    d.abort()  # the store is rolled back, the Processor reset
    assert len(d.processor.index) == 0 and d.processor._ownership.unbuilt == {d.partition(SID)}
    d.emitter.clear()
    d.result(ack(first), at(10, 5, 2))  # the input again, after the rewind
    assert not d.processor._ownership.unbuilt
    d.checkpoint(at(10, 5, 3))
    (commit,) = d.commits()
    assert (commit["previous_ms"], commit["downstream_ms"]) == (T0, at(10, 1))
    assert [t["start_ms"] for t in d.tasks()] == [at(10, 2)]  # the next window, once
    assert d.processor.index.next_wake_ms(d.partition(SID)) is not None


def test_a_lost_tick_is_sent_again_after_the_resend_interval_whatever_the_wall_clock_does() -> None:
    d = Driver(mono_ms=1_000)
    d.assign(SID)
    d.upsert(SID, at(10, 0, 30))  # (10:00, 10:01] is due at 10:01
    p = d.partition(SID)
    assert d.processor.partitions_to_tick(at(10, 30)) == [p]  # a tick sent, and lost
    d.mono_ms = 1_000 + TICK_RESEND_MS - 1
    assert d.processor.partitions_to_tick(at(10, 30, 4)) == []  # in flight still
    # The wall clock steps 25 minutes back (the window is still due on it): the resend is not
    # withheld until the clock is back at 10:30.
    d.mono_ms = 1_000 + TICK_RESEND_MS
    assert d.processor.partitions_to_tick(at(10, 5)) == [p]
    # And a forward step sends no burst: one tick in flight per partition.
    d.mono_ms += 1
    assert d.processor.partitions_to_tick(at(12, 0)) == []
    d.send(d.topics.ticks, None, at(12, 0, 1), partition=p)  # the resent tick arrives
    assert len(d.tasks()) == 1


def _same_partition_streams(d: Driver, count: int) -> list[str]:
    found = [SID]
    n = 0
    while len(found) < count:
        n += 1
        if d.partition(f"s-{n}") == d.partition(SID):
            found.append(f"s-{n}")
    return found


@BOTH_ENGINES
def test_an_incremental_rebuild_yields_between_slices_and_indexes_what_a_whole_one_does(
    transactional: bool,
) -> None:
    d = Driver(transactional=transactional)
    streams = _same_partition_streams(d, 5)
    d.assign(SID)
    for sid in streams:
        d.upsert(sid, at(10, 0))
    whole, sliced = d.restart(), d.restart()
    whole.assign(SID)
    whole.processor._ownership.build(at(10, 0))
    sliced.assign(SID)
    yielded = list(sliced.processor._ownership.building(at(10, 0), slice_size=2))
    assert yielded == [2, 4]
    assert sliced.processor.unbuilt == set()
    p = d.partition(SID)
    assert sorted(sliced.processor.index._wake[p]) == sorted(whole.processor.index._wake[p])
    sliced.tick(at(10, 5))
    assert {t["stream_id"] for t in sliced.tasks()} == set(streams)


@BOTH_ENGINES
def test_a_rebalance_while_a_rebuild_is_suspended_voids_it(transactional: bool) -> None:
    d = Driver(transactional=transactional)
    streams = _same_partition_streams(d, 5)
    d.assign(SID)
    for sid in streams:
        d.upsert(sid, at(10, 0))
    again = d.restart()
    again.assign(SID)
    building = again.processor._ownership.building(at(10, 0), slice_size=2)
    assert next(building) == 2
    again.processor.on_revoked({again.partition(SID)})  # the partition goes meanwhile
    assert list(building) == []  # nothing more is indexed
    assert len(again.processor.index) == 0 and again.processor.unbuilt == set()
    again.assign(SID)  # and comes back: built again, whole
    assert list(again.processor.building(at(10, 0))) == []
    assert again.processor.unbuilt == set() and len(again.processor.index) == len(streams)


def _health(d: Driver) -> SourceHealth:
    health = SourceHealth(OutagePolicy(min_streams=1, ratio=0.1), "test")
    processor = d.processor
    processor.health = processor._inputs.health = processor._ownership.health = health
    return health


def _in_memory(d: Driver, health: SourceHealth) -> dict[str, Any]:
    """Everything the Processor keeps in memory per stream, as plain dicts."""
    processor = d.processor
    return {
        "index": processor.index._wake,
        "scavenger": processor._scavenger.index._wake,
        "marks": dict(processor.metrics.tracked.downstreams()),
        "in_flight": {
            s: record[5]
            for s, record in processor.metrics.tracked._records.items()
            if record[6] is not None
        },
        "health": health._streams,
    }


def _rebuilt(d: Driver, now_ms: int, cache_size: int) -> tuple[dict[str, Any], int]:
    """What a rebuild at `now_ms` over d's store puts in memory, with a record cache of
    `cache_size`, and how many states it decoded."""
    again = d.restart()
    health = _health(again)
    records = again.processor._records
    records._cache_size = cache_size
    decoded = 0
    decode = records.decode

    def counted(stream_id: str, raw: bytes) -> Record:
        nonlocal decoded
        decoded += 1
        return decode(stream_id, raw)

    records.decode = counted  # type: ignore[method-assign]
    again.processor.on_assigned(range(again.partitions))
    again.processor._ownership.build(now_ms)
    return _in_memory(again, health), decoded


def test_a_rebuild_from_stored_summaries_holds_what_the_inputs_built_and_decodes_nothing() -> None:
    """Transactional: every kind of stream (in flight, retrying and failing at its source,
    paused, bypassed and listed, finished, deleted) past what the record cache holds is rebuilt
    from its stored summary alone, to the index, scavenger entries, metrics and outage counts
    that the inputs built up, as from its decoded state."""
    d = Driver(transactional=True)
    health = _health(d)
    d.assign(*[f"s-{i}" for i in range(40)])
    for i in range(40):
        config: dict[str, Any] = {"source": "thanos"} if i % 2 else {}
        if i % 8 == 5:
            config["end_ms"] = T0 + 60_000
        if i % 8 == 6:
            config["non_retryable"] = ["bad"]
        d.upsert(f"s-{i}", at(10, 0), **config)
    d.tick(at(10, 1))
    for task in d.tasks():
        i = int(task["stream_id"].split("-")[1])
        kind = i % 8
        if kind in (1, 6):
            d.result(nack(task, "bad" if kind == 6 else "no_data"), at(10, 1, 5))
        elif kind in (2, 5):
            d.result(ack(task), at(10, 1, 5))
        elif kind == 3:
            d.control({"type": "pause", "stream_id": task["stream_id"]}, at(10, 1, 5))
        elif kind == 4:
            d.control({"type": "delete", "stream_id": task["stream_id"]}, at(10, 1, 5))
    d.tick(at(10, 1, 6))
    live = _in_memory(d, health)  # what the Processor built up input by input
    assert sum(map(len, live["scavenger"].values())) == 15  # ended 10, listed 5
    assert sum(map(len, live["health"].values())) == 20  # the streams with a source
    assert sum(live["in_flight"].values()) == 15  # kinds 0, 3 (paused) and 7: unanswered
    assert any(failing for s in live["health"].values() for _, failing, _ in s.values())

    from_summaries, decoded = _rebuilt(d, at(10, 2), cache_size=10)
    assert decoded == 10  # as many as the cache holds; the others from their summaries
    assert from_summaries == live
    from_summaries, decoded = _rebuilt(d, at(10, 2), cache_size=100)
    assert decoded == 40 and from_summaries == live

    for sid, raw in list(d.store.data.items()):  # records as they were before summaries
        doc = orjson.loads(raw)
        del doc["x"]
        d.store.data[sid] = orjson.dumps(doc)
    from_states, decoded = _rebuilt(d, at(10, 2), cache_size=10)
    assert decoded == 40
    assert from_states == live
