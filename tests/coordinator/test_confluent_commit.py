"""The confluent engine's commit path, in process: the real `ConfluentEngine` and its RocksDB
state over fake Kafka clients (tests/coordinator/fake_clients.py) that fail at a chosen step.

Each test does what the engine's loop does
(streams.coordinator.confluent.engine.ConfluentEngine.run): a step polls and processes; a
commit that raises TransactionAborted is followed by `_abort`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from streams.coordinator.confluent.engine import ConfluentEngine
from streams.coordinator.confluent.rocks import STREAMS
from streams.coordinator.processor import partition_of
from streams.coordinator.settings import CoordinatorSettings
from streams.kafka.transactions import TransactionAborted
from streams.topics import Topics

from .fake_clients import FakeBroker, FakeChangelog

PARTITIONS = 2
SID = "s1"
P = partition_of(SID.encode(), PARTITIONS)


class _Hold:
    """Pacing that never commits by itself: the test says when."""

    def poll_timeout_s(self, work_left: bool) -> float:
        return 0.0

    def commit_now(self, read: int, pending: bool, since_commit_s: float) -> bool:
        return False


class _Points:
    """The crash-point hook, recording what each point saw instead of killing the process."""

    def __init__(self, broker: FakeBroker, engine: ConfluentEngine) -> None:
        self.broker, self.engine = broker, engine
        self.seen: list[tuple[str, int, int]] = []  # (point, tasks visible, store offset)

    def reached(self, point: str) -> None:
        store = self.engine.state.stores[P]
        self.seen.append((point, self.broker.count(self.engine.topics.tasks), store.offset))


def _engine(tmp_path: Path, broker: FakeBroker, name: str = "a") -> ConfluentEngine:
    settings = CoordinatorSettings(
        topics=Topics("commit"),
        data_dir=tmp_path / name,
        partitions=PARTITIONS,
        view_interval_ms=0,
        instance_id=name,
    )
    engine = ConfluentEngine(settings, clients=broker.make, probe=lambda: True)
    changelog = FakeChangelog(broker, engine.topics.eos_changelog)

    def restore(partitions: list[int]) -> int:
        return engine.state.restore(changelog, partitions)

    engine._restore = restore  # type: ignore[method-assign]
    engine.clients.init_transactions()
    engine.clients.subscribe(engine.inputs, engine._on_assigned, engine._on_revoked,
                             engine._on_lost)  # fmt: skip
    return engine


def _upsert(broker: FakeBroker, topics: Topics, stream_id: str = SID) -> None:
    """A stream whose first two windows are due at once."""
    start = time.time_ns() // 1_000_000 - 2_500
    value = {"type": "upsert", "stream_id": stream_id, "start_ms": start - start % 1000,
             "window_ms": 1000, "step_ms": 1000}  # fmt: skip
    key = stream_id.encode()
    broker.append(topics.control, partition_of(key, PARTITIONS), key, json.dumps(value).encode())


def _step(engine: ConfluentEngine) -> None:
    engine._step(_Hold(), time.monotonic())  # type: ignore[arg-type]


def _commit(engine: ConfluentEngine) -> bool:
    """Commit as the loop does; return whether it committed (else it aborted and rewound)."""
    try:
        engine.commit(time.time_ns() // 1_000_000)
    except TransactionAborted:
        engine._abort()
        return False
    return True


def _stored(engine: ConfluentEngine, stream_id: str = SID) -> bytes | None:
    store = engine.state.stores.get(P)
    return None if store is None else store.get(STREAMS + stream_id.encode())


def _tasks(broker: FakeBroker, topics: Topics) -> list[Any]:
    return [(t["stream_id"], t["start_ms"]) for t in broker.records(topics.tasks)]


def _run_once(engine: ConfluentEngine) -> None:
    for _ in range(3):  # assignment, then the input, then its windows' tick
        _step(engine)


def test_a_commit_goes_through_its_steps_in_order(tmp_path: Path) -> None:
    broker = FakeBroker(PARTITIONS)
    engine = _engine(tmp_path, broker)
    points = _Points(broker, engine)
    engine._crash = points  # type: ignore[assignment]
    _upsert(broker, engine.topics)
    _run_once(engine)
    assert _tasks(broker, engine.topics) == [], "nothing visible before the commit"
    assert _commit(engine)
    tasks = len(_tasks(broker, engine.topics))
    assert tasks >= 1, broker.log
    changelog_end = broker.watermark(engine.topics.eos_changelog, P) - 1
    assert points.seen == [
        ("after_produce", 0, -1),
        ("after_send_offsets", 0, -1),
        ("after_commit", tasks, -1),  # committed, the local store not yet written
        ("after_rocksdb_write", tasks, changelog_end),
    ]
    assert engine.clients.calls[-2:] == ["send_offsets", "commit"]  # type: ignore[attr-defined]
    assert broker.offsets[(engine.topics.control, P)] == 1
    assert _stored(engine) is not None
    assert broker.log[(engine.topics.eos_changelog, P)][-1][1] == _stored(engine)


# Every step of a commit the fake can fail at: producing an output (inside a step), producing
# the changelog, sending the offsets, delivering what was produced, the commit itself.
STEPS = ["produce:commit.tasks", "produce:changelog", "send_offsets", "deliver",
         "commit_transaction"]  # fmt: skip


@pytest.mark.parametrize("step", STEPS)
def test_an_abort_at_any_step_leaves_nothing_visible_and_the_redo_commits_once(
    tmp_path: Path, step: str
) -> None:
    broker = FakeBroker(PARTITIONS)
    engine = _engine(tmp_path, broker)
    if step == "produce:changelog":
        step = f"produce:{engine.topics.eos_changelog}"
    engine.clients.fail_at = step  # type: ignore[attr-defined]
    _upsert(broker, engine.topics)
    aborted = False
    try:
        _run_once(engine)  # producing a task fails here, inside the step
    except TransactionAborted:
        engine._abort()
        aborted = True
    if not aborted:
        aborted = not _commit(engine)
    assert aborted, f"{step} never failed"
    clients = broker.made[0]
    assert clients.aborted_txns == 1 and clients.committed_txns == 0
    assert broker.log.keys() == {(engine.topics.control, P)}, "nothing visible but the input"
    assert broker.offsets == {}
    assert _stored(engine) is None and engine.state.stores[P].offset == -1
    # Rewound: every input back at its last committed offset (none yet: the start).
    control = (engine.topics.control, P)
    assert clients.seeks[-1][control] == 0 and engine.positions[control] == 0
    _run_once(engine)
    assert _commit(engine)
    tasks = _tasks(broker, engine.topics)
    assert len(tasks) >= 1 and len(set(tasks)) == len(tasks), tasks
    assert broker.offsets[control] == 1
    assert _stored(engine) == broker.log[(engine.topics.eos_changelog, P)][-1][1]


def test_a_commit_that_aborts_drops_the_state_of_the_open_transaction_only(
    tmp_path: Path,
) -> None:
    """A second stream's transaction aborts: the first's committed state stays as it was."""
    broker = FakeBroker(PARTITIONS)
    engine = _engine(tmp_path, broker)
    _upsert(broker, engine.topics)
    _run_once(engine)
    assert _commit(engine)
    before = _stored(engine)
    offset_before = engine.state.stores[P].offset
    control = engine.topics.control
    visible = {tp: len(rs) for tp, rs in broker.log.items() if tp[0] != control}
    _upsert(broker, engine.topics, "s2")
    _upsert(broker, engine.topics, SID)  # an update of the first: its record changes too
    _run_once(engine)
    engine.clients.fail_at = "deliver"  # type: ignore[attr-defined]
    assert not _commit(engine)
    assert _stored(engine) == before and engine.state.stores[P].offset == offset_before
    assert {tp: len(rs) for tp, rs in broker.log.items() if tp[0] != control} == visible
    assert broker.offsets[(control, P)] == 1


def test_a_revocation_mid_transaction_whose_commit_aborts_leaves_nothing_visible(
    tmp_path: Path,
) -> None:
    broker = FakeBroker(PARTITIONS)
    engine = _engine(tmp_path, broker)
    _upsert(broker, engine.topics)
    _run_once(engine)
    assert engine.clients.in_transaction
    engine.clients.fail_at = "commit_transaction"  # type: ignore[attr-defined]
    broker.made[0].revoke(list(range(PARTITIONS)))
    assert broker.made[0].aborted_txns == 1
    assert broker.log.keys() == {(engine.topics.control, P)} and broker.offsets == {}
    assert engine.owned == set() and engine.state.stores == {} and engine.positions == {}
    assert engine.processor.assigned == frozenset()
    # The next owner reads the input again and commits its outputs once.
    other = _engine(tmp_path, broker, "b")
    _run_once(other)
    assert _commit(other)
    tasks = _tasks(broker, engine.topics)
    assert len(tasks) >= 1 and len(set(tasks)) == len(tasks), tasks
    assert _stored(other) is not None


def test_a_revocation_mid_transaction_commits_it_and_the_next_owner_goes_on(
    tmp_path: Path,
) -> None:
    broker = FakeBroker(PARTITIONS)
    engine = _engine(tmp_path, broker)
    _upsert(broker, engine.topics)
    _run_once(engine)
    broker.made[0].revoke(list(range(PARTITIONS)))
    assert broker.made[0].committed_txns == 1
    tasks = _tasks(broker, engine.topics)
    assert len(tasks) >= 1 and broker.offsets[(engine.topics.control, P)] == 1
    other = _engine(tmp_path, broker, "b")
    _run_once(other)
    assert _stored(other) is not None, "restored from the changelog"
    assert _commit(other)
    assert _tasks(broker, engine.topics) == tasks, "nothing made again"


def test_a_lost_assignment_mid_transaction_drops_its_state_and_outputs(tmp_path: Path) -> None:
    broker = FakeBroker(PARTITIONS)
    engine = _engine(tmp_path, broker)
    _upsert(broker, engine.topics)
    _run_once(engine)
    assert engine.processor.dirty(time.time_ns() // 1_000_000) or engine.clients.in_transaction
    broker.made[0].lose(list(range(PARTITIONS)))
    assert broker.made[0].aborted_txns == 1 and broker.made[0].committed_txns == 0
    assert broker.log.keys() == {(engine.topics.control, P)} and broker.offsets == {}
    assert engine.owned == set() and engine.state.stores == {}
    other = _engine(tmp_path, broker, "b")
    _run_once(other)
    assert _commit(other)
    tasks = _tasks(broker, engine.topics)
    assert len(tasks) >= 1 and len(set(tasks)) == len(tasks), tasks
