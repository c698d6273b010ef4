"""The coordinator's Processor driven in-process: no broker, explicit clocks, recorded outputs.

Streams use the seed's config unless a test says otherwise: windows of 60 s cut in 15 s steps,
fixed 60 s retries, a 60 s task timeout and a bypass 300 s after the first failure.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.coordinator.processor import TICK_RESEND_MS, partition_of
from streams.coordinator.record import Record
from streams.wire import MAX_RAW_BYTES, RejectedMessage

from .fakes import T0, Driver, ack, at, heartbeat, nack

# Tests that hold for both engines run twice: at-least-once (Faust) and transactional, where
# the driver commits a transaction after every input and tick.
BOTH_ENGINES = pytest.mark.parametrize("transactional", [False, True], ids=["faust", "confluent"])

SID = "cluster-a"
NEIGHBOUR = "cluster-k"  # in the same partition as cluster-a


def started(
    flush_ms: int = 200, transactional: bool = False, **config: Any
) -> tuple[Driver, dict[str, Any]]:
    """cluster-a created at 10:00:30, its partition owned and indexed, (10:00, 10:01] dispatched
    by the tick at 10:01."""
    d = Driver(flush_ms=flush_ms, transactional=transactional)
    d.upsert(SID, at(10, 0, 30), **config)
    d.assign(SID)
    d.tick(at(10, 0, 30))
    assert d.tick(at(10, 1)) == [d.partition(SID)]
    (task,) = d.tasks()
    d.emitter.clear()
    return d, task


def window(start_ms: int, end_ms: int, reason: str = "ack", attempts: int = 1) -> dict[str, Any]:
    return {"start_ms": start_ms, "end_ms": end_ms, "reason": reason, "attempts": attempts}


# -- the seed's examples -------------------------------------------------------------------------


@BOTH_ENGINES
def test_a_tick_dispatches_the_window_once_it_ends_and_an_ack_commits_it(
    transactional: bool,
) -> None:
    d = Driver(transactional=transactional)
    d.upsert(SID, at(10, 0, 30))
    assert d.emitter.work == [] and SID in d.store.data
    p = d.partition(SID)
    assert d.tick(at(10, 5)) == []  # the partition is not owned yet

    d.assign(SID)
    assert d.tick(at(10, 0, 30)) == [p]  # the first tick builds the index
    assert d.tick(at(10, 0, 59, 999)) == []  # nothing is due before 10:01
    d.processor.on_tick(p, at(10, 0, 59, 999))  # even a forced tick does not dispatch early
    assert d.emitter.work == []

    assert d.tick(at(10, 1)) == [p]
    (task,) = d.emitter.work
    assert task.topic == "tidemark.tasks" and task.key == b"cluster-a"
    value = task.json()
    assert isinstance(value.pop("incarnation"), int)
    assert value == {
        "task_id": f"cluster-a/{T0}/1",
        "stream_id": SID,
        "start_ms": at(10, 0),
        "end_ms": at(10, 1),
        "step_ms": 15_000,
        "attempt": 1,
        "dispatched_ms": at(10, 1),
        "deadline_ms": at(10, 2),
        "params": {},
    }
    d.emitter.clear()

    d.result(ack(task.json(), at(10, 1)), at(10, 1))
    (commit,) = d.emitter.work
    assert commit.topic == "tidemark.commits" and commit.key == b"cluster-a"
    assert commit.json() == {
        "stream_id": SID,
        "downstream_ms": at(10, 1),
        "previous_ms": at(10, 0),
        "committed_ms": at(10, 1),
        "windows": [window(at(10, 0), at(10, 1))],
    }
    d.emitter.clear()

    assert d.tick(at(10, 1, 59, 999)) == []
    assert d.tick(at(10, 2)) == [p]
    (following,) = d.tasks()
    assert (following["start_ms"], following["end_ms"], following["attempt"]) == (
        at(10, 1),
        at(10, 2),
        1,
    )
    assert d.commits() == []


@BOTH_ENGINES
def test_b_a_window_nacked_every_attempt_is_bypassed_and_the_next_one_follows(
    transactional: bool,
) -> None:
    d, task = started(transactional=transactional)

    d.result(nack(task), at(10, 1, 5))
    assert d.emitter.work == [] and d.processor.stats["requeues"] == 1
    for minute in range(2, 7):  # fixed 60 s retries at 10:02:05 ... 10:06:05
        assert d.tick(at(10, minute, 4)) == []
        d.tick(at(10, minute, 5))
        (retry,) = d.tasks()
        assert (retry["start_ms"], retry["end_ms"], retry["attempt"]) == (T0, at(10, 1), minute)
        assert retry["dispatched_ms"] == at(10, minute, 5)
        d.emitter.clear()
        d.result(nack(retry), at(10, minute, 5))
        if minute < 6:
            assert d.emitter.work == []

    (bypassed,) = d.bypassed()
    assert bypassed.key == f"cluster-a/{T0}".encode()
    assert bypassed.json() == {
        "stream_id": SID,
        "start_ms": T0,
        "end_ms": at(10, 1),
        "attempts": 6,
        "first_failed_ms": at(10, 1, 5),
        "bypassed_ms": at(10, 6, 5),
        "last_error": {"kind": "no_data", "message": f"no_data in cluster-a/{T0}/6"},
    }
    assert d.commits() == [
        {
            "stream_id": SID,
            "downstream_ms": at(10, 1),
            "previous_ms": T0,
            "committed_ms": at(10, 6, 5),
            "windows": [window(T0, at(10, 1), "bypass", 6)],
        }
    ]
    (following,) = d.tasks()  # (10:01, 10:02] is long due
    assert (following["start_ms"], following["end_ms"], following["attempt"]) == (
        at(10, 1),
        at(10, 2),
        1,
    )
    assert d.processor.stats["bypasses"] == 1


@BOTH_ENGINES
def test_c_a_core_metric_nack_requeues_the_same_window_without_a_commit(
    transactional: bool,
) -> None:
    d, task = started(transactional=transactional)

    d.result(nack(task, "core_metric"), at(10, 1, 5))
    assert d.emitter.work == []
    assert d.tick(at(10, 2, 4)) == []
    d.tick(at(10, 2, 5))

    (retry,) = d.tasks()
    assert retry["task_id"] == f"cluster-a/{T0}/2"
    assert (retry["start_ms"], retry["end_ms"], retry["attempt"]) == (T0, at(10, 1), 2)
    assert d.commits() == [] and d.bypassed() == []


# -- time: deadlines and ticks -------------------------------------------------------------------


@BOTH_ENGINES
def test_a_missed_deadline_requeues_the_window_through_ticks(transactional: bool) -> None:
    d, task = started(transactional=transactional)
    assert task["deadline_ms"] == at(10, 2)

    assert d.tick(at(10, 1, 59, 999)) == []
    d.tick(at(10, 2))
    assert d.processor.stats["timeouts"] == 1 and d.emitter.work == []  # retry due at 10:03

    assert d.tick(at(10, 2, 59, 999)) == []
    d.tick(at(10, 3))
    (retry,) = d.tasks()
    assert (retry["start_ms"], retry["attempt"], retry["deadline_ms"]) == (T0, 2, at(10, 4))


@BOTH_ENGINES
def test_a_heartbeat_moves_the_deadline_the_ticks_wait_for(transactional: bool) -> None:
    d, task = started(transactional=transactional)

    d.result(heartbeat(task), at(10, 1, 30))
    assert d.tick(at(10, 2)) == []  # the deadline is now 10:02:30
    d.tick(at(10, 2, 30))
    assert d.processor.stats["timeouts"] == 1


@BOTH_ENGINES
def test_a_window_without_any_result_is_bypassed_by_deadlines_alone(transactional: bool) -> None:
    d = Driver(transactional=transactional)
    d.upsert(
        SID,
        at(10, 0, 30),
        task_timeout_ms=1000,
        retry={"strategy": "fixed", "interval_ms": 500},
        bypass_after_ms=3000,
    )
    d.assign(SID)
    now = at(10, 0, 30)
    while not d.bypassed() and now < at(10, 2):
        d.tick(now)
        now += 100

    (bypassed,) = d.bypassed()
    record = bypassed.json()
    assert (record["start_ms"], record["end_ms"]) == (T0, at(10, 1))
    assert record["first_failed_ms"] == at(10, 1, 1)
    assert record["bypassed_ms"] - record["first_failed_ms"] >= 3000
    assert record["last_error"]["kind"] == "timeout"
    (commit,) = d.commits()
    assert commit["windows"] == [window(T0, at(10, 1), "bypass", record["attempts"])]


@BOTH_ENGINES
def test_partitions_to_tick_lists_owned_partitions_that_are_unbuilt_or_due(
    transactional: bool,
) -> None:
    d = Driver(transactional=transactional)
    d.upsert(SID, at(10, 0, 30))
    p = d.partition(SID)
    processor = d.processor
    assert processor.partitions_to_tick(at(11, 0)) == []  # not owned, although due

    processor.on_assigned(range(d.partitions))
    d.mono_ms = 0  # the resend interval is on the monotonic clock
    assert processor.partitions_to_tick(at(10, 0, 30)) == list(range(d.partitions))
    # one tick in flight per partition: not again until it is handled or lost
    d.mono_ms = 1_000
    assert processor.partitions_to_tick(at(10, 0, 31)) == []
    resend = at(10, 0, 30) + TICK_RESEND_MS
    d.mono_ms = TICK_RESEND_MS - 1
    assert processor.partitions_to_tick(resend - 1) == []
    d.mono_ms = TICK_RESEND_MS
    assert processor.partitions_to_tick(resend) == list(range(d.partitions))

    for q in range(d.partitions):
        processor.on_tick(q, resend)
    assert processor.partitions_to_tick(at(10, 0, 59)) == []  # built, nothing due
    assert processor.partitions_to_tick(at(10, 1)) == [p]
    assert processor.partitions_to_tick(at(10, 1)) == []
    processor.on_tick(p, at(10, 1))
    assert len(d.tasks()) == 1
    assert processor.partitions_to_tick(at(10, 1, 30)) == []  # next: the deadline at 10:02


@BOTH_ENGINES
def test_a_revoked_partition_leaves_the_index_and_is_not_ticked(transactional: bool) -> None:
    d = Driver(transactional=transactional)
    d.upsert(SID, at(10, 0, 30))
    d.assign(SID)
    p = d.partition(SID)
    d.tick(at(10, 0, 30))
    assert d.processor.index.next_wake_ms(p) == at(10, 1)

    d.processor.on_revoked([p])
    assert d.processor.assigned == frozenset()
    assert d.processor.index.next_wake_ms(p) is None and len(d.processor.index) == 0
    assert d.tick(at(10, 5)) == []
    d.processor.on_tick(p, at(10, 5))  # a late tick for the old partition
    assert d.emitter.work == []

    d.assign(SID)  # owned again: rebuilt from the table
    assert d.tick(at(10, 5)) == [p]
    assert [t["start_ms"] for t in d.tasks()] == [T0]


# -- coalesced commits -----------------------------------------------------------------------------


def three_in_flight(flush_ms: int) -> tuple[Driver, list[dict[str, Any]]]:
    """Created at 10:05 with 3 windows in flight: (10:00, 10:01], (10:01, 10:02], (10:02, 10:03]."""
    d = Driver(flush_ms=flush_ms)
    d.upsert(SID, at(10, 5), max_in_flight=3)
    d.assign(SID)
    d.tick(at(10, 5))
    tasks = d.tasks()
    assert [t["start_ms"] for t in tasks] == [at(10, 0), at(10, 1), at(10, 2)]
    d.emitter.clear()
    return d, tasks


def test_acks_within_the_flush_interval_are_coalesced_into_one_commit() -> None:
    d, (first, second, third) = three_in_flight(flush_ms=200)
    now = at(10, 5, 10)

    d.result(ack(first), now)  # the first after a quiet interval: at once
    assert d.commits() == [
        {
            "stream_id": SID,
            "downstream_ms": at(10, 1),
            "previous_ms": at(10, 0),
            "committed_ms": now,
            "windows": [window(at(10, 0), at(10, 1))],
        }
    ]
    d.result(ack(second), now + 50)
    d.result(ack(third), now + 100)
    assert len(d.commits()) == 1
    assert d.tick(now + 199) == []

    d.tick(now + 200)
    assert d.commits()[1:] == [
        {
            "stream_id": SID,
            "downstream_ms": at(10, 3),
            "previous_ms": at(10, 1),
            "committed_ms": now + 200,
            "windows": [window(at(10, 1), at(10, 2)), window(at(10, 2), at(10, 3))],
        }
    ]

    (fourth,) = [t for t in d.tasks() if t["start_ms"] == at(10, 3)]
    d.result(ack(fourth), now + 500)  # quiet again since the flush at +200: at once
    assert [c["downstream_ms"] for c in d.commits()] == [at(10, 1), at(10, 3), at(10, 4)]
    assert d.commits()[2]["committed_ms"] == now + 500


def test_flush_ms_zero_announces_every_ack_at_once() -> None:
    d, tasks = three_in_flight(flush_ms=0)
    now = at(10, 5, 10)
    for i, task in enumerate(tasks):
        d.result(ack(task), now + i)
    commits = d.commits()
    assert [(c["previous_ms"], c["downstream_ms"]) for c in commits] == [
        (at(10, 0), at(10, 1)),
        (at(10, 1), at(10, 2)),
        (at(10, 2), at(10, 3)),
    ]
    assert [c["committed_ms"] for c in commits] == [now, now + 1, now + 2]


def test_a_full_batch_is_committed_at_once_whatever_the_interval() -> None:
    d = Driver(flush_ms=60_000)
    d.upsert(SID, at(10, 5), window_ms=1000, step_ms=1000, max_in_flight=300)
    tasks = d.tasks()
    assert len(tasks) == 300
    now = at(10, 5, 1)
    for i, task in enumerate(tasks[:257]):
        d.result(ack(task), now + i)
        if i == 255:
            assert len(d.commits()) == 1  # the first ack's, then 255 windows waiting

    first, batch = d.commits()
    assert first["downstream_ms"] == T0 + 1000
    assert (batch["previous_ms"], batch["downstream_ms"]) == (T0 + 1000, T0 + 257_000)
    assert len(batch["windows"]) == 256 and batch["committed_ms"] == now + 256


# -- rejections ------------------------------------------------------------------------------------


def _crc32_partition(key: bytes, partitions: int) -> int:
    """Where confluent-kafka's default (consistent_random, CRC32) partitioner puts a key."""
    return zlib.crc32(key) % partitions


def _ack_fields(**changes: Any) -> dict[str, Any]:
    """An ack of attempt 1 of (10:00, 10:01], which is in flight in `started()`."""
    fields = {
        "stream_id": SID,
        "start_ms": T0,
        "end_ms": at(10, 1),
        "attempt": 1,
        "outcome": "ack",
        "ack_ms": at(10, 1),
    }
    fields.update(changes)
    return {k: v for k, v in fields.items() if v is not None}


def _raw(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields).encode()


GOOD_KEY = SID.encode()
NOT_MURMUR2 = _crc32_partition(GOOD_KEY, 6)
WRONG_PARTITION = (
    f"partition: key 'cluster-a' belongs to partition 2 of 6, not {NOT_MURMUR2}; "
    "produce with the murmur2 partitioner (confluent-kafka: partitioner=murmur2_random)"
)
WRONG_KEY = "key: must be the stream_id 'cluster-a' as UTF-8"
NOT_INT = "Input should be a valid integer"


def bad_result(case: str, value: bytes, reason: str, **kw: Any) -> Any:
    return rejection(case, "results", value, reason, **kw)


def bad_control(case: str, value: bytes, reason: str, **kw: Any) -> Any:
    return rejection(case, "control", value, reason, **kw)


def rejection(
    case: str,
    topic: str,
    value: bytes,
    reason: str,
    key: bytes | None = GOOD_KEY,
    partition: int | None = None,
) -> Any:
    return pytest.param(topic, value, key, partition, reason, id=case)


def upsert_raw(**changes: Any) -> bytes:
    fields = {"type": "upsert", "stream_id": SID, "start_ms": 0, **changes}
    return _raw({k: v for k, v in fields.items() if v is not None})


@BOTH_ENGINES
@pytest.mark.parametrize(
    ("topic", "value", "key", "partition", "reason"),
    [
        bad_result(
            "bad json", b'{"stream_id": "cluster-a", ', "value: not valid JSON (Invalid JSON: "
        ),
        bad_result("empty value", b"", "value: not valid JSON (Invalid JSON: "),
        bad_result("non-object", b'["cluster-a", 1]', "value: Input should be an object"),
        bad_result("a string", b'"ack"', "value: Input should be an object"),
        bad_result("missing field", _raw(_ack_fields(attempt=None)), "attempt: Field required"),
        bad_result("string for an int", _raw(_ack_fields(attempt="1")), f"attempt: {NOT_INT}"),
        bad_result("bool for an int", _raw(_ack_fields(start_ms=True)), f"start_ms: {NOT_INT}"),
        bad_result(
            "float for an int",
            _raw(_ack_fields(ack_ms=at(10, 1) + 0.5)),
            f"ack_ms: {NOT_INT}",
        ),
        bad_result(
            "missing outcome",
            _raw(_ack_fields(outcome=None)),
            "outcome: is required; one of ack, nack, heartbeat",
        ),
        bad_result(
            "unknown outcome",
            _raw(_ack_fields(outcome="done")),
            "outcome: is not valid; one of ack, nack, heartbeat",
        ),
        bad_result(
            "nack without kind",
            _raw(_ack_fields(outcome="nack", error={"message": "x"})),
            "error.kind: Field required",
        ),
        bad_result("empty window", _raw(_ack_fields(end_ms=T0)), "end_ms: must be after start_ms"),
        bad_result(
            "unknown stream",
            _raw(_ack_fields(stream_id="cluster-zz")),
            "unknown stream",
            key=b"cluster-zz",
        ),
        bad_result(
            "ack_ms after the window",
            _raw(_ack_fields(ack_ms=at(10, 1) + 1)),
            f"ack_ms {at(10, 1) + 1} must satisfy start_ms < ack_ms <= end_ms",
        ),
        bad_result(
            "ack_ms at its start",
            _raw(_ack_fields(ack_ms=T0)),
            f"ack_ms {T0} must satisfy start_ms < ack_ms <= end_ms",
        ),
        bad_result(
            "window never dispatched",
            _raw(_ack_fields(start_ms=at(10, 1), end_ms=at(10, 2), ack_ms=at(10, 2))),
            "window was never dispatched",
        ),
        bad_result(
            "attempt never dispatched",
            _raw(_ack_fields(attempt=2)),
            "attempt 2 was never dispatched",
        ),
        bad_result("other key", _raw(_ack_fields()), WRONG_KEY, key=b"cluster-b"),
        bad_result("no key", _raw(_ack_fields()), WRONG_KEY, key=None, partition=2),
        bad_result("crc32 partition", _raw(_ack_fields()), WRONG_PARTITION, partition=NOT_MURMUR2),
        bad_control(
            "control without type",
            b'{"stream_id": "cluster-a"}',
            "type: is required; one of upsert, pause, resume, delete, replay, source_set, "
            "source_delete",
        ),
        bad_control(
            "unknown control",
            b'{"type": "stop", "stream_id": "cluster-a"}',
            "type: is not valid; one of upsert, pause, resume, delete, replay, source_set, "
            "source_delete",
        ),
        bad_control(
            "upsert without start_ms", upsert_raw(start_ms=None), "start_ms: Field required"
        ),
        bad_control(
            "window not in steps",
            upsert_raw(window_ms=50_000),
            "window_ms: must be a multiple of step_ms (15000)",
        ),
        bad_control(
            "bad retry",
            upsert_raw(retry={"strategy": "fixed", "interval_ms": 0}),
            "retry.interval_ms: Input should be greater than 0",
        ),
        bad_control(
            "pause unknown stream",
            b'{"type": "pause", "stream_id": "cluster-zz"}',
            "unknown stream",
            key=b"cluster-zz",
        ),
        bad_control(
            "control other key",
            b'{"type": "delete", "stream_id": "cluster-a"}',
            WRONG_KEY,
            key=b"cluster-a ",
        ),
    ],
)
def test_invalid_input_is_rejected_with_its_reason_and_changes_nothing(
    topic: str,
    value: bytes,
    key: bytes | None,
    partition: int | None,
    reason: str,
    transactional: bool,
) -> None:
    d, _ = started(transactional=transactional)
    before = d.store.snapshot()
    if partition is None:
        partition = 0 if key is None else partition_of(key, d.partitions)

    offset = d.next_offset(f"tidemark.{topic}")
    d.send(f"tidemark.{topic}", value, at(10, 1, 5), key=key, partition=partition)

    (sent,) = d.emitter.work
    assert sent.topic == "tidemark.rejected" and sent.key == (key or b"")
    rejected = RejectedMessage.model_validate_json(sent.value)
    if reason.endswith("(Invalid JSON: "):  # the parser's own words follow
        assert rejected.reason.startswith(reason), rejected.reason
    else:
        assert rejected.reason == reason
    assert (rejected.source_topic, rejected.partition, rejected.offset) == (
        f"tidemark.{topic}",
        partition,
        offset,
    )
    assert rejected.key == (None if key is None else key.decode())
    assert rejected.value == value.decode()
    assert d.store.snapshot() == before
    assert d.processor.stats["rejected"] == 1


@BOTH_ENGINES
def test_a_value_that_is_not_an_input_topic_is_rejected(transactional: bool) -> None:
    d, _ = started(transactional=transactional)
    d.send("tidemark.tasks", _ack_fields(), at(10, 1, 5))
    (rejected,) = d.rejected()
    assert rejected["reason"] == "topic: 'tidemark.tasks' is not an input topic"


@BOTH_ENGINES
def test_a_rejected_record_holds_the_raw_value_cut_to_4_kib(transactional: bool) -> None:
    d, _ = started(transactional=transactional)
    raw = _raw(_ack_fields(padding="é" * 5000, attempt="one"))
    assert len(raw) > 2 * MAX_RAW_BYTES

    d.result(raw, at(10, 1, 5), key=GOOD_KEY)
    (rejected,) = d.rejected()
    assert rejected["reason"] == "attempt: Input should be a valid integer"
    assert rejected["value"] == raw[:MAX_RAW_BYTES].decode("utf-8", "replace")
    assert len(rejected["value"].encode()) <= MAX_RAW_BYTES


@BOTH_ENGINES
def test_a_result_for_a_deleted_stream_is_rejected_with_the_reason_until_it_is_collected(
    transactional: bool,
) -> None:
    d, task = started(transactional=transactional, gc_grace_ms=10_000)
    d.control({"type": "delete", "stream_id": SID}, at(10, 1, 5))
    assert Record.decode(d.store.data[SID]).state.deleted_ms == at(10, 1, 5)
    assert d.processor.index.next_wake_ms(d.partition(SID)) is None  # nothing to dispatch
    assert d.processor.partitions_to_tick(at(10, 1, 14)) == []
    assert d.emitter.work == []

    d.result(ack(task), at(10, 1, 6))
    (rejected,) = d.rejected()
    assert rejected["reason"] == (
        f"unknown stream: deleted at {at(10, 1, 5)}; its state is kept until {at(10, 1, 15)} "
        "(gc_grace_ms), then forgotten"
    )
    d.tick(at(10, 1, 15))  # the scavenger collects it
    assert d.store.data == {} and len(d.processor.index) == 0
    assert d.processor.metrics.collected == 1
    d.result(ack(task), at(10, 1, 16))
    assert d.rejected()[-1]["reason"] == "unknown stream"
    assert d.tick(at(11, 0)) == []


# -- stale, duplicate and replayed input ----------------------------------------------------------


@BOTH_ENGINES
def test_a_duplicate_ack_is_counted_and_changes_nothing(transactional: bool) -> None:
    d, task = started(transactional=transactional)
    d.result(ack(task), at(10, 1, 5))
    assert len(d.commits()) == 1
    before, sent = d.store.snapshot(), len(d.emitter.work)

    d.result(ack(task), at(10, 1, 6))  # the same event again, as after a crash
    d.result(ack(task, T0 + 15_000), at(10, 1, 7))  # a partial ack of a finished window
    assert d.processor.stats["duplicate"] == 2
    assert d.store.snapshot() == before and len(d.emitter.work) == sent


@BOTH_ENGINES
def test_stale_results_of_an_earlier_attempt_are_counted_and_change_nothing(
    transactional: bool,
) -> None:
    d, task = started(transactional=transactional)
    d.result(nack(task), at(10, 1, 5))
    before = d.store.snapshot()

    d.result(nack(task), at(10, 1, 6))  # replayed nack: the attempt is no longer in flight
    d.result(heartbeat(task), at(10, 1, 7))
    assert d.processor.stats["stale"] == 2 and d.emitter.work == []
    assert d.store.snapshot() == before

    d.tick(at(10, 2, 5))
    (retry,) = d.tasks()
    d.result(nack(task), at(10, 2, 6))  # attempt 1 while attempt 2 is in flight
    assert d.processor.stats["stale"] == 3 and d.tasks() == [retry]
    assert d.processor.stats["requeues"] == 1


@BOTH_ENGINES
def test_a_replayed_bypassing_nack_bypasses_and_commits_only_once(transactional: bool) -> None:
    d, task = started(max_attempts=1, transactional=transactional)
    d.result(nack(task), at(10, 1, 5))
    assert len(d.bypassed()) == 1 and len(d.commits()) == 1
    before = d.store.snapshot()

    d.result(nack(task), at(10, 1, 6))
    again = d.restart()  # and once more after a restart
    again.assign(SID)
    again.processor.on_tick(again.partition(SID), at(10, 1, 7))
    again.emitter.clear()
    again.result(nack(task), at(10, 1, 8))

    assert len(d.bypassed()) == 1 and len(d.commits()) == 1
    assert again.emitter.work == [] and again.processor.stats["duplicate"] == 1
    assert d.store.snapshot() == before


@BOTH_ENGINES
def test_a_replayed_ack_after_a_restart_commits_nothing_new(transactional: bool) -> None:
    d, task = started(transactional=transactional)
    d.result(ack(task), at(10, 1, 5))
    d.emitter.deliver_all()
    d.tick(at(10, 2))  # dispatches (10:01, 10:02] and saves the confirmed outbox
    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 2, 1))
    assert again.emitter.work == []

    again.result(ack(task), at(10, 2, 2))
    assert again.emitter.work == [] and again.processor.stats["duplicate"] == 1


# -- the outbox across a crash --------------------------------------------------------------------


def test_an_unconfirmed_commit_is_announced_again_after_a_restart() -> None:
    d, task = started()
    d.result(ack(task), at(10, 1, 5))
    (commit,) = d.commits()

    again = d.restart()  # the producer never confirmed the commit
    again.assign(SID)
    assert again.emitter.work == []
    again.tick(at(10, 1, 10))

    (sent,) = again.emitter.work
    assert sent.topic == "tidemark.commits" and sent.key == b"cluster-a"
    assert sent.json() == {**commit, "committed_ms": at(10, 1, 10)}
    assert again.processor.stats["reannounced"] == 1


def test_unconfirmed_bypass_records_are_announced_again_after_a_restart() -> None:
    d, task = started(max_attempts=2)
    d.result(nack(task), at(10, 1, 5))
    d.tick(at(10, 2, 5))
    (retry,) = d.tasks()
    d.result(nack(retry), at(10, 2, 6))
    (bypassed,) = d.bypassed()
    (commit,) = d.commits()

    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 2, 10))
    (bypassed_again,) = again.bypassed()
    assert (bypassed_again.key, bypassed_again.json()) == (bypassed.key, bypassed.json())
    assert again.commits() == [{**commit, "committed_ms": at(10, 2, 10)}]
    assert again.tasks() == []  # a lost dispatch is healed by its deadline, not re-sent


def test_nothing_is_announced_again_once_delivery_was_confirmed_and_saved() -> None:
    d, task = started(max_attempts=1)
    d.result(nack(task), at(10, 1, 5))
    assert len(d.bypassed()) == 1 and len(d.commits()) == 1
    # the commit, the bypass record, and four views: created, again by the rebuild on its
    # assignment, dispatched, bypassed
    assert d.emitter.deliver_all() == 2 + 4
    d.tick(at(10, 2))  # the next event of the stream saves the confirmation

    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 2, 1))
    assert again.emitter.work == []
    assert again.processor.stats["reannounced"] == 0


def test_a_confirmation_not_yet_saved_is_announced_again_rather_than_lost() -> None:
    d, task = started()
    d.result(ack(task), at(10, 1, 5))
    d.emitter.deliver_all()  # confirmed, but no later event of the stream saved it

    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 1, 10))
    assert [c["downstream_ms"] for c in again.commits()] == [at(10, 1)]


def test_a_re_announced_commit_covers_exactly_the_unconfirmed_windows() -> None:
    d, (first, second, third) = three_in_flight(flush_ms=0)
    d.result(ack(first), at(10, 5, 1))
    d.emitter.deliver_all()  # the first commit reached `commits`
    d.result(ack(second), at(10, 5, 2))
    d.result(ack(third), at(10, 5, 3))
    assert [c["downstream_ms"] for c in d.commits()] == [at(10, 1), at(10, 2), at(10, 3)]

    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 5, 4))
    assert again.commits() == [
        {
            "stream_id": SID,
            "downstream_ms": at(10, 3),
            "previous_ms": at(10, 1),
            "committed_ms": at(10, 5, 4),
            "windows": [window(at(10, 1), at(10, 2)), window(at(10, 2), at(10, 3))],
        }
    ]


def test_windows_waiting_for_a_flush_at_a_crash_are_announced_after_the_restart() -> None:
    d, (first, second, _) = three_in_flight(flush_ms=200)
    d.result(ack(first), at(10, 5, 1))  # announced at once, never confirmed
    d.result(ack(second), at(10, 5, 1, 50))  # waiting for the flush when the process dies
    assert len(d.commits()) == 1

    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 5, 2))
    commits = again.commits()
    assert [(c["previous_ms"], c["downstream_ms"]) for c in commits] == [
        (at(10, 0), at(10, 1)),
        (at(10, 1), at(10, 2)),
    ]
    assert [w["end_ms"] for c in commits for w in c["windows"]] == [at(10, 1), at(10, 2)]


def test_a_confirmation_consumed_by_an_ignored_event_still_prunes_the_outbox() -> None:
    d, task = started()
    d.result(ack(task), at(10, 1, 5))
    d.emitter.deliver_all()
    d.result(ack(task), at(10, 1, 6))  # a duplicate: ignored, so nothing is saved
    d.tick(at(10, 2))  # an accepted event of the stream: the outbox is saved

    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 2, 1))
    assert again.commits() == []  # the commit to 10:01 was delivered and that was saved


# -- no input stops the coordinator ----------------------------------------------------------------

FIELDS = (
    "type",
    "stream_id",
    "start_ms",
    "end_ms",
    "attempt",
    "outcome",
    "ack_ms",
    "error",
    "window_ms",
    "step_ms",
    "delay_ms",
    "task_timeout_ms",
    "bypass_after_ms",
    "retry",
    "max_attempts",
    "max_in_flight",
    "params",
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 4),
    st.sampled_from([T0, at(10, 1), at(10, 2), at(10, 1, 30), 15_000, 60_000]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([SID, "cluster-b", "", "ack", "nack", "heartbeat", "upsert", "delete"]),
    st.text(max_size=5),
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
base_messages = st.sampled_from(
    [
        _ack_fields(),
        _ack_fields(ack_ms=at(10, 0, 30)),
        {**_ack_fields(outcome="nack", ack_ms=None), "error": {"kind": "no_data"}},
        _ack_fields(outcome="heartbeat", ack_ms=None),
        {"type": "upsert", "stream_id": SID, "start_ms": T0},
        {"type": "upsert", "stream_id": "cluster-b", "start_ms": T0, "max_in_flight": 2},
        {"type": "pause", "stream_id": SID},
        {"type": "resume", "stream_id": SID},
        {"type": "delete", "stream_id": SID},
    ]
)


@st.composite
def messages(draw: st.DrawFn) -> tuple[str, bytes | None, bytes | None, int | None]:
    """(topic, key, value, partition): arbitrary bytes, or a valid message with random edits."""
    topic = draw(st.sampled_from(["control", "results"]))
    if draw(st.booleans()):
        key = draw(st.none() | st.binary(max_size=12) | st.just(GOOD_KEY))
        value = draw(st.none() | st.binary(max_size=64))
        return topic, key, value, draw(st.none() | st.integers(0, 5))
    fields = dict(draw(base_messages))
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=3)):
        if draw(st.booleans()):
            fields[name] = draw(json_values)
        else:
            fields.pop(name, None)
    if "type" in fields:
        topic = "control"
    elif "outcome" in fields:
        topic = "results"
    sid = fields.get("stream_id")
    key = sid.encode() if isinstance(sid, str) and draw(st.booleans()) else GOOD_KEY
    return topic, key, json.dumps(fields).encode(), None


@BOTH_ENGINES
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=st.lists(messages(), min_size=1, max_size=4))
def test_no_input_raises_and_each_is_applied_rejected_or_ignored(
    inputs: list[tuple[str, bytes | None, bytes | None, int | None]],
    transactional: bool,
) -> None:
    d, _ = started(transactional=transactional)
    now = at(10, 1, 5)
    for topic, key, value, partition in inputs:
        before, writes = d.store.snapshot(), d.store.writes
        rejected, ignored = len(d.rejected()), d.processor.stats["stale"]
        ignored += d.processor.stats["duplicate"]
        if partition is None:
            partition = 0 if key is None else partition_of(key, d.partitions)

        d.send(f"tidemark.{topic}", value, now, key=key, partition=partition)

        was_rejected = len(d.rejected()) - rejected
        was_ignored = d.processor.stats["stale"] + d.processor.stats["duplicate"] - ignored
        was_applied = d.store.writes - writes
        assert sorted([was_rejected, was_ignored, was_applied]) == [0, 0, 1]
        if not was_applied:
            assert d.store.snapshot() == before
        now += 1000


@BOTH_ENGINES
def test_an_absurdly_large_start_ms_is_rejected_not_raised(transactional: bool) -> None:
    d, _ = started(transactional=transactional)
    before = d.store.snapshot()
    upsert = '{"type": "upsert", "stream_id": "cluster-b", "start_ms": %s}' % ("9" * 4300)

    d.control(upsert.encode(), at(10, 1, 5), key=b"cluster-b")

    (rejected,) = d.rejected()
    assert rejected["reason"].startswith("start_ms")
    assert d.store.snapshot() == before


@BOTH_ENGINES
def test_every_value_the_coordinator_emits_is_strict_json(transactional: bool) -> None:
    d = Driver(transactional=transactional)
    d.control(
        b'{"type": "upsert", "stream_id": "cluster-a", "start_ms": 0, "params": {"q": NaN}}',
        at(10, 1),
        key=GOOD_KEY,
    )

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    assert d.emitter.sent
    for sent in d.emitter.sent:
        json.loads(sent.value, parse_constant=refuse)


@BOTH_ENGINES
def test_the_rebuild_leaves_an_unreadable_record_alone_and_indexes_the_others(
    transactional: bool,
) -> None:
    d = Driver(transactional=transactional)
    d.upsert(SID, at(10, 0, 30))
    d.upsert(NEIGHBOUR, at(10, 0, 30))
    assert d.partition(NEIGHBOUR) == d.partition(SID)
    d.store.data[NEIGHBOUR] = b"\x00 not a record"

    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 1))
    assert [t["stream_id"] for t in again.tasks()] == [SID]
    assert again.store.data[NEIGHBOUR] == b"\x00 not a record"


@BOTH_ENGINES
def test_a_result_for_a_stream_with_an_unreadable_record_does_not_raise(
    transactional: bool,
) -> None:
    d, task = started(transactional=transactional)
    d.store.data[SID] = b"\x00 not a record"
    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 1, 5))  # the rebuild logs the record and leaves it alone

    again.result(ack(task), at(10, 1, 6))
    assert len(again.rejected()) == 1


# -- the replay lane through the processor ------------------------------------------------------


def bypassed_first_window(transactional: bool = False) -> tuple[Driver, dict[str, Any]]:
    """cluster-a's (10:00, 10:01] nacked until bypassed at once (a non-retryable kind)."""
    d, task = started(non_retryable=["bad_params"], transactional=transactional)
    d.result(nack(task, "bad_params"), at(10, 1, 5))
    (record,) = [s.json() for s in d.bypassed()]
    assert (record["start_ms"], record["attempts"]) == (T0, 1)
    return d, task


@BOTH_ENGINES
def test_a_replay_dispatches_the_bypassed_window_and_an_ack_unlists_it(transactional: bool) -> None:
    d, _ = bypassed_first_window(transactional)
    d.emitter.clear()
    d.control({"type": "replay", "stream_id": SID, "from_ms": T0, "to_ms": at(10, 1)}, at(10, 2))
    (replay,) = [t for t in d.tasks() if t.get("replay")]
    assert (replay["start_ms"], replay["end_ms"], replay["attempt"]) == (T0, at(10, 1), 2)
    downstream_before = d.commits()[-1]["downstream_ms"] if d.commits() else None

    d.result(ack(replay), at(10, 2, 1))
    (tombstone,) = d.bypassed()
    assert (tombstone.key, tombstone.value) == (f"{SID}/{T0}".encode(), None)
    (replayed,) = [c for c in d.commits() if c["windows"][0]["reason"] == "replayed"]
    assert replayed["downstream_ms"] == replayed["previous_ms"]  # progress does not move
    assert downstream_before is None or replayed["downstream_ms"] == downstream_before
    if not transactional:  # at least once: kept in the outbox until both are delivered
        assert json.loads(d.replay_store.data[SID])["announcing"] == [[T0, at(10, 1), 2]]
        d.emitter.deliver_all()
        d.tick(at(10, 5))  # the stream's next tick drops what was delivered
    assert d.replay_store.data == {}  # nothing listed any more


def _replayed_and_saved() -> tuple[Driver, dict[str, Any]]:
    """At least once: the replay of (10:00, 10:01] acked and saved, its commit and tombstone
    sent but not yet delivered."""
    d, _ = bypassed_first_window()
    d.control({"type": "replay", "stream_id": SID, "from_ms": T0, "to_ms": at(10, 1)}, at(10, 2))
    (replay,) = [t for t in d.tasks() if t.get("replay")]
    d.emitter.deliver_all()
    d.emitter.clear()
    d.result(ack(replay), at(10, 2, 1))
    return d, replay


def _announced(d: Driver) -> tuple[list[Any], list[Any]]:
    """The replay's tombstones and replayed commits sent, after the last bypass record sent
    again for the same window (the live outbox's, which the tombstone must follow)."""
    replayed = [c for c in d.commits() if c["windows"][0]["reason"] == "replayed"]
    sent = [(s.key, s.value) for s in d.bypassed()]
    last_record = max((i for i, (_, v) in enumerate(sent) if v is not None), default=-1)
    return sent[last_record + 1 :], [c["windows"] for c in replayed]


ANNOUNCED = (
    [(f"{SID}/{T0}".encode(), None)],
    [[{"start_ms": T0, "end_ms": at(10, 1), "reason": "replayed", "attempts": 2}]],
)


def test_a_replayed_window_lost_in_a_crash_before_its_delivery_is_announced_again() -> None:
    d, replay = _replayed_and_saved()
    assert _announced(d) == ANNOUNCED
    again = d.restart()  # the deliveries never happened; the saved state says it was replayed
    again.assign(SID)
    again.result(ack(replay), at(10, 2, 5))  # the ack read again: a duplicate now
    again.tick(at(10, 2, 6))
    assert _announced(again) == ANNOUNCED  # so the rebuild's first tick announces it again
    again.emitter.deliver_all()
    again.tick(at(10, 5))
    assert again.replay_store.data == {}
    third = again.restart()
    third.assign(SID)
    third.tick(at(10, 5, 1))
    assert _announced(third) == ([], [])  # delivered: never again


def test_a_replayed_window_whose_delivery_failed_is_announced_again_at_the_next_tick() -> None:
    d, _ = _replayed_and_saved()
    d.emitter.fail_all()
    d.emitter.clear()
    d.tick(at(10, 5))
    assert _announced(d) == ANNOUNCED
    d.emitter.deliver_all()
    d.tick(at(10, 6))
    assert d.replay_store.data == {}


@BOTH_ENGINES
def test_a_replay_without_a_listed_window_is_rejected(transactional: bool) -> None:
    d, _ = started(transactional=transactional)
    d.control({"type": "replay", "stream_id": SID, "from_ms": T0, "to_ms": at(10, 1)}, at(10, 2))
    (rejected,) = d.rejected()
    assert rejected["reason"] == "replay: no bypassed window of 'cluster-a' is listed"


@BOTH_ENGINES
def test_deleting_a_stream_unlists_its_bypassed_windows(transactional: bool) -> None:
    d, _ = bypassed_first_window(transactional)
    d.emitter.clear()
    d.control({"type": "delete", "stream_id": SID}, at(10, 2))
    (tombstone,) = d.bypassed()
    assert (tombstone.key, tombstone.value) == (f"{SID}/{T0}".encode(), None)
    assert d.replay_store.data == {}
    assert Record.decode(d.store.data[SID]).state.deleted_ms is not None
