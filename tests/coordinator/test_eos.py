"""The confluent engine's exactly-once guarantee, under the faults that threaten it.

Every check reads `commits` and `tasks` with read_committed, as workers and read models do:
each window is announced exactly once (no repeat, no gap, no regression) through a SIGKILL at
each step of a commit, a zombie, a rebalance under load and a loop stalled past the
transaction timeout.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from streams.coordinator.confluent.crash_points import CRASH_POINTS
from streams.coordinator.confluent.rocks import STREAMS, PartitionStore
from streams.coordinator.processor import partition_of
from streams.coordinator.record import Record
from streams.kafka.settings import KafkaSettings
from streams.topics import Topics
from tests.coordinator.fakes import Driver
from tests.support.commits import check_exactly_once
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Feed, Responder, Tail

pytestmark = pytest.mark.broker
LONG_POINTS = ("after_produce", "after_send_offsets")

WINDOW = 1000
BACKLOG = 40  # windows behind now at creation: every stream catches up through the faults
CONFIG = {
    "window_ms": WINDOW,
    "step_ms": WINDOW,
    "max_in_flight": 4,
    "task_timeout_ms": 5000,
    "bypass_after_ms": 600_000,
    "retry": {"strategy": "immediate"},
}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def start_ms() -> int:
    now = now_ms()
    return now - now % WINDOW - BACKLOG * WINDOW


def ack_all(task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "ack", {"ack_ms": task["end_ms"]}


class Run:
    """A prefix with streams, a stand-in worker that acks, and a read_committed tail."""

    def __init__(self, kafka: KafkaSettings, prefix: str, streams: int, unique: str) -> None:
        self.kafka, self.prefix = kafka, prefix
        self.streams = [f"s{i}-{unique}" for i in range(streams)]
        self.start = start_ms()
        self.feed = Feed(kafka, prefix)
        self.tail = Tail(kafka, prefix, ["tasks", "commits"], f"tail-{unique}")
        self.responder = Responder(kafka, prefix, f"worker-{unique}", ack_all)

    def create(self) -> None:
        for s in self.streams:
            self.feed.upsert(s, self.start, **CONFIG)

    def marks(self) -> dict[str, int]:
        return {
            s: max((c["downstream_ms"] for c in self.tail.values("commits", s)), default=0)
            for s in self.streams
        }

    def wait_caught_up(self, timeout_s: float = 60) -> None:
        target = self.start + BACKLOG * WINDOW
        self.tail.wait_for(
            f"every stream past {target}",
            lambda: all(m >= target for m in self.marks().values()),
            timeout_s,
        )

    def check(self) -> dict[str, int]:
        """Exactly once per stream, and no task id visible twice; return each stream's mark."""
        marks = {s: check_exactly_once(self.tail.values("commits", s), self.start)
                 for s in self.streams}  # fmt: skip
        ids = Counter(t["task_id"] for t in self.tail.values("tasks"))
        twice = [i for i, n in ids.items() if n > 1]
        assert not twice, f"tasks visible twice: {twice[:5]}"
        return marks

    def close(self) -> None:
        self.tail.close()


def _coordinator(
    kafka: KafkaSettings, prefix: str, home: Path, name: str, **env: str
) -> CoordinatorProcess:
    return CoordinatorProcess(
        kafka, prefix, home / name, home / f"{name}.log", partitions=4, engine="confluent", env=env
    )


def _consumed(kafka: KafkaSettings, group: str, topic: str) -> dict[int, int]:
    """The offset up to which `group` has committed, per partition of `topic`."""
    consumer = Consumer(kafka.consumer(**{"group.id": group}))
    parts = list(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    found = consumer.committed([TopicPartition(topic, p) for p in parts], timeout=30)
    consumer.close()
    return {tp.partition: max(tp.offset, 0) for tp in found}


def _read_committed(
    kafka: KafkaSettings, topic: str, below: dict[int, int] | None = None
) -> list[tuple[int, bytes, bytes | None]]:
    """Every committed record of a topic: (partition, key, value); only offsets under `below`."""
    consumer = Consumer(kafka.consumer(**{"group.id": "check", "enable.partition.eof": True}))
    parts = list(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in parts])
    out: list[tuple[int, bytes, bytes | None]] = []
    ended: set[int] = set()
    deadline = time.monotonic() + 30
    while len(ended) < len(parts) and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 0.5):
            if msg.error() is not None:
                ended.add(msg.partition() or 0)
            elif below is None or (msg.offset() or 0) < below.get(msg.partition() or 0, 0):
                out.append((msg.partition() or 0, msg.key() or b"", msg.value()))
    consumer.close()
    assert len(ended) == len(parts), f"{topic} not read to its end in 30 s"
    return out


def _driver_marks(kafka: KafkaSettings, prefix: str, streams: list[str]) -> dict[str, int]:
    """What the in-memory driver computes for the inputs the coordinator committed."""
    driver = Driver(partitions=4)
    driver.processor.on_assigned(range(4))
    topics, now = Topics(prefix), now_ms()
    for topic, send in ((topics.control, driver.control), (topics.results, driver.result)):
        consumed = _consumed(kafka, topics.eos_group, topic)
        for _, _, value in _read_committed(kafka, topic, consumed):
            assert value is not None
            send(json.loads(value), now)
    return {s: Record.decode(driver.store.data[s]).state.downstream_ms for s in streams}


# `make test` kills at two steps (after the commit and after the RocksDB write), `make test-long`
# at the two before the commit too (the longest: their transaction is aborted on restart).
@pytest.mark.parametrize(
    "point",
    [pytest.param(p, marks=pytest.mark.long) if p in LONG_POINTS else p for p in CRASH_POINTS],
)
def test_sigkill_at_each_step_of_a_commit_keeps_every_window_exactly_once(
    kafka: KafkaSettings, unique: str, tmp_path: Path, point: str
) -> None:
    prefix = f"cp-{unique}"
    proc = _coordinator(kafka, prefix, tmp_path, "c", TIDEMARK_CRASH_AT=f"{point}:6")
    run = Run(kafka, prefix, 8, unique)
    proc.start().wait_ready()
    try:
        with run.responder:
            run.create()
            deadline = time.monotonic() + 30
            while proc.exited() is None and time.monotonic() < deadline:
                run.tail.poll()
            assert proc.exited() == -9, f"no crash at {point}; log:\n{proc.tail()}"
            del proc.env["TIDEMARK_CRASH_AT"]
            proc.start().wait_ready()
            run.wait_caught_up()
        proc.stop()  # commits what it holds: read everything committed, then compare
        run.tail.drain()
        marks = run.check()
        # RocksDB holds exactly the committed state: what a read_committed consumer of the
        # changelog ends with, and what the in-memory driver computes from the same inputs.
        latest = {key: value for _, key, value in
                  _read_committed(kafka, Topics(prefix).eos_changelog)}  # fmt: skip
        driven = _driver_marks(kafka, prefix, run.streams)
        for s in run.streams:
            store = PartitionStore(
                tmp_path / "c" / "eos" / f"partition-{partition_of(s.encode(), 4)}"
            )
            stored = store.get(STREAMS + s.encode())
            store.close()
            assert stored is not None and stored == latest[STREAMS + s.encode()]
            state = Record.decode(stored).state
            seen = (state.downstream_ms, marks[s], driven[s])
            assert seen[0] == seen[1] == seen[2], f"{s}: stored, announced, driven: {seen}"
    finally:
        run.close()
        proc.kill()


def test_a_zombie_makes_nothing_visible(kafka: KafkaSettings, unique: str, tmp_path: Path) -> None:
    """A coordinator stopped past its session timeout, then resumed, while the other one took
    its partitions over: nothing it does after that becomes visible."""
    prefix = f"zombie-{unique}"
    fast_group = {"TIDEMARK_SESSION_TIMEOUT_MS": "6000"}
    a = _coordinator(kafka, prefix, tmp_path, "a", **fast_group)
    b = _coordinator(kafka, prefix, tmp_path, "b", **fast_group)
    run = Run(kafka, prefix, 12, unique)
    a.start().wait_ready(partitions=4)
    b.start()
    try:
        with run.responder:
            b.wait_ready()
            run.create()
            run.tail.wait_for("progress on every stream", lambda: all(run.marks().values()))
            a.pause()
            b.wait_ready(timeout_s=60, partitions=4)  # b owns everything now
            paused_marks = run.marks()
            run.tail.wait_for("progress after the takeover", lambda: all(
                run.marks()[s] > paused_marks[s] for s in run.streams), 40)  # fmt: skip
            a.resume()  # the zombie wakes with its old transaction and generation
            time.sleep(5)
            run.wait_caught_up()
        run.check()
        if a.exited() is not None:
            assert a.exited() == 1, a.tail()
            assert "exiting: a restart carries on" in a.tail(), a.tail()
    finally:
        run.close()
        a.resume()
        a.kill()
        b.kill()


def test_a_second_coordinator_joining_under_load_keeps_exactly_once(
    kafka: KafkaSettings, unique: str, tmp_path: Path
) -> None:
    prefix = f"join-{unique}"
    a, b = _coordinator(kafka, prefix, tmp_path, "a"), _coordinator(kafka, prefix, tmp_path, "b")
    run = Run(kafka, prefix, 16, unique)
    a.start().wait_ready(partitions=4)
    try:
        with run.responder:
            run.create()
            run.tail.wait_for("the backlog under way", lambda: sum(
                1 for c in run.tail.values("commits")) >= 20)  # fmt: skip
            b.start().wait_ready()
            run.wait_caught_up(timeout_s=90)

            def split() -> bool:  # the two own every partition once (a rebalance may be late)
                docs = [doc for doc in (a.health(), b.health()) if doc and doc["status"] == "ok"]
                held = [doc["partitions"] for doc in docs]
                return len(held) == 2 and all(held) and sorted(held[0] + held[1]) == [0, 1, 2, 3]

            run.tail.wait_for("both coordinators to own two partitions each", split)
        run.check()
    finally:
        run.close()
        a.kill()
        b.kill()


def test_a_loop_stalled_past_the_transaction_timeout_recovers_without_loss(
    kafka: KafkaSettings, unique: str, tmp_path: Path
) -> None:
    """SIGSTOP past transaction.timeout.ms (10 s), within the session timeout: the broker aborts
    the open transaction and fences the producer; the process exits saying why and a restart
    (the test plays the supervisor) carries on exactly once."""
    prefix = f"stall-{unique}"
    proc = _coordinator(kafka, prefix, tmp_path, "c", TIDEMARK_SESSION_TIMEOUT_MS="30000")
    run = Run(kafka, prefix, 8, unique)
    proc.start().wait_ready()
    try:
        with run.responder:
            run.create()
            run.tail.wait_for("progress", lambda: all(run.marks().values()))
            proc.pause()
            time.sleep(13)
            proc.resume()
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:
                run.tail.poll()
                if proc.exited() is not None:
                    assert proc.exited() == 1, proc.tail()
                    proc.start().wait_ready(timeout_s=60)
                    break
                if all(m >= run.start + BACKLOG * WINDOW for m in run.marks().values()):
                    break
            run.wait_caught_up(timeout_s=60)
        run.check()
    finally:
        run.close()
        proc.kill()


def test_switching_engines_over_live_state_is_refused_with_what_to_do(
    kafka: KafkaSettings, unique: str, tmp_path: Path
) -> None:
    prefix = f"switch-{unique}"
    faust = CoordinatorProcess(
        kafka, prefix, tmp_path / "f", tmp_path / "f.log", partitions=4, engine="faust"
    )
    faust.start().wait_ready()
    Feed(kafka, prefix).upsert(f"s-{unique}", start_ms(), **CONFIG)
    changelog = Topics(prefix).changelog
    deadline = time.monotonic() + 30
    while not _read_committed(kafka, changelog) and time.monotonic() < deadline:
        time.sleep(0.5)
    faust.stop()
    said = faust.log.read_text(errors="replace")  # its first and last lines say what ran
    assert "starting: engine faust, instance " in said, said
    assert f", topics {prefix}.*, Kafka {kafka.bootstrap_servers}, /health and /metrics" in said
    assert said.rstrip().endswith("tidemark coordinator stopped"), said[-2000:]
    confluent = _coordinator(kafka, prefix, tmp_path, "c")
    confluent.start()
    assert confluent.proc is not None
    assert confluent.proc.wait(60) != 0
    said = confluent.tail()
    assert "kept by the faust engine" in said and "--engine faust" in said, said


def test_health_reports_the_engine_and_its_transactions(
    kafka: KafkaSettings, unique: str, tmp_path: Path
) -> None:
    prefix = f"health-{unique}"
    proc = _coordinator(kafka, prefix, tmp_path, "c")
    run = Run(kafka, prefix, 2, unique)
    proc.start().wait_ready()
    try:
        with run.responder:
            run.create()
            run.wait_caught_up()
        doc = proc.health()
        assert doc is not None and doc["engine"] == "confluent"
        assert doc["stats"]["transactions"] >= 1
        assert json.loads(json.dumps(doc)) == doc
    finally:
        run.close()
        proc.stop()
