"""The scavenger (streams/coordinator/scavenger.py) driven in-process: bypass retention, the
collection of ended streams, and a bounded slice per pass over 50,000 streams."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest

from streams.coordinator.record import Record
from streams.coordinator.scavenger import SCAVENGE_SLICE
from streams.core import StreamConfig, StreamState
from streams.core.replay import Listed, ReplayState, replay_to_dict

from .fakes import PARTITIONS, T0, Driver, at, heartbeat, nack

BOTH_ENGINES = pytest.mark.parametrize("transactional", [False, True], ids=["faust", "confluent"])
# The Faust engine's variants of these run in `make test-long` (tests/conftest.py).
LONG_ON_FAUST = ("test_a_pass_over_50_000_due_streams_handles_one_slice_within_the_bound",)
SID = "cluster-a"
RETENTION_MS = 10 * 60_000
# What one pass (a partition's tick, its transaction's checkpoint included) may take at most
# over 50,000 due streams, in CPU time of the thread (wall time on the 2-core CI machine, which
# runs the broker and a second test worker beside it, took up to 1.5 s for the same work):
# a pass handles SCAVENGE_SLICE (1,000) of them: 15-24 ms at the median here, 0.42 s at most.
PASS_BOUND_S = 1.0


def bypassed(transactional: bool, **config: Any) -> tuple[Driver, dict[str, Any]]:
    """cluster-a's (10:00, 10:01] bypassed at 10:01:05 (max_attempts 1)."""
    d = Driver(transactional=transactional)
    d.assign(SID)
    d.upsert(SID, at(10, 0, 30), max_attempts=1, bypass_retention_ms=RETENTION_MS, **config)
    d.tick(at(10, 1))
    (task,) = d.tasks()
    d.result(nack(task), at(10, 1, 5))
    assert len(d.bypassed()) == 1
    return d, task


def listed(d: Driver) -> list[int]:
    raw = d.replay_store.data.get(SID)
    return [] if raw is None else [item[0] for item in orjson.loads(raw)["listed"]]


@BOTH_ENGINES
def test_a_bypassed_window_past_retention_is_tombstoned_and_counted(transactional: bool) -> None:
    d, _ = bypassed(transactional)
    d.emitter.clear()
    expires_ms = at(10, 1, 5) + RETENTION_MS
    d.tick(expires_ms - 1)
    assert d.bypassed() == [] and listed(d) == [T0]
    d.tick(expires_ms)
    (tombstone,) = d.bypassed()
    assert (tombstone.key, tombstone.value) == (f"{SID}/{T0}".encode(), None)
    assert listed(d) == [] and d.processor.metrics.expired == 1
    assert d.processor.stats["bypasses_expired"] == 1
    d.control({"type": "replay", "stream_id": SID, "from_ms": T0, "to_ms": at(10, 1)}, at(10, 12))
    assert "no bypassed window" in d.rejected()[-1]["reason"]  # no longer replayable


@BOTH_ENGINES
def test_a_window_being_replayed_is_kept_past_retention_until_its_replay_ends(
    transactional: bool,
) -> None:
    d, _ = bypassed(transactional)
    d.control({"type": "replay", "stream_id": SID, "from_ms": T0, "to_ms": at(10, 1)}, at(10, 2))
    (replay,) = [t for t in d.tasks() if t.get("replay")]
    d.emitter.clear()
    expires_ms = at(10, 1, 5) + RETENTION_MS
    d.result(heartbeat(replay), expires_ms - 1)
    d.tick(expires_ms)
    assert listed(d) == [T0] and d.bypassed() == []  # in flight: kept
    d.result(nack(replay), expires_ms + 1)  # the replay failed: listed again, and past retention
    d.tick(expires_ms + 2)
    assert listed(d) == [] and d.bypassed()[-1].value is None


@BOTH_ENGINES
def test_a_restarted_coordinator_knows_the_retention_of_what_is_listed(transactional: bool) -> None:
    d, _ = bypassed(transactional)
    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 1, 6))
    again.tick(at(10, 1, 5) + RETENTION_MS)
    assert listed(again) == [] and again.bypassed()[-1].value is None


@BOTH_ENGINES
def test_a_finished_streams_bypasses_go_with_its_state(transactional: bool) -> None:
    d, _ = bypassed(transactional, end_ms=at(10, 1), gc_grace_ms=60_000)
    assert listed(d) == [T0]
    d.emitter.clear()
    d.tick(at(10, 2, 5))  # finished at 10:01:05, collected a minute later
    assert d.store.data == {} and d.replay_store.data == {}
    assert [s.value for s in d.bypassed()] == [None]
    assert d.emitter.on("tidemark.streams")[-1].value is None


def _finished(stream_id: str, finished_ms: int, grace_ms: int) -> bytes:
    config = StreamConfig(stream_id, T0, end_ms=T0 + 60_000, gc_grace_ms=grace_ms)
    end = T0 + 60_000
    return Record.new(StreamState(config, end, end, end, finished_ms=finished_ms)).encode()


def _old_bypass(stream_id: str, bypassed_ms: int) -> bytes:
    window = Listed(T0, T0 + 60_000, 3, T0 + 60_000, bypassed_ms, None)
    return orjson.dumps(replay_to_dict(ReplayState(stream_id, [window])))


@BOTH_ENGINES
def test_a_pass_over_50_000_due_streams_handles_one_slice_within_the_bound(
    transactional: bool,
) -> None:
    """25,000 finished streams past gc_grace_ms and 25,000 live ones with a window past
    retention, all due at once: each pass handles at most SCAVENGE_SLICE streams of its
    partition, within PASS_BOUND_S, and the passes together finish the work."""
    d = Driver(transactional=transactional, checkpoint_each=False)
    now = at(12, 0)
    for i in range(25_000):
        sid = f"done-{i}"
        d.store.data[sid] = _finished(sid, now - 120_000, 60_000)
        live = f"live-{i}"
        config = StreamConfig(live, now - 60_000, bypass_retention_ms=60_000)
        origin = config.start_ms - config.start_ms % config.step_ms
        d.store.data[live] = Record.new(StreamState(config, origin, origin, origin)).encode()
        d.replay_store.data[live] = _old_bypass(live, now - 120_000)
    d.processor.on_assigned(range(PARTITIONS))
    d.processor.on_tick(0, now - 200_000)  # builds every partition: nothing is due yet
    if transactional:
        d.checkpoint(now - 200_000)
    assert len(d.processor._scavenger.index) == 50_000

    passes, slowest_s = 0, 0.0
    while any(d.processor._scavenger.next_wake_ms(p) is not None for p in range(PARTITIONS)):
        for p in range(PARTITIONS):
            before = len(d.processor._scavenger.index)
            started = time.thread_time()
            d.processor.on_tick(p, now)
            if transactional:
                d.checkpoint(now)
            slowest_s = max(slowest_s, time.thread_time() - started)
            assert before - len(d.processor._scavenger.index) <= SCAVENGE_SLICE
            passes += 1
        d.emitter.clear()
    assert slowest_s < PASS_BOUND_S, f"the slowest pass took {slowest_s:.3f} s of CPU"
    assert passes >= 50_000 / SCAVENGE_SLICE
    assert sorted(d.store.data) == sorted(f"live-{i}" for i in range(25_000))
    assert d.replay_store.data == {}
    assert d.processor.metrics.collected == 25_000 and d.processor.metrics.expired == 25_000
