"""A coordinator's local store given back after its changelog moved on without it.

The confluent engine resumes a store from the changelog offset it holds only when the changelog
can prove that offset (streams.coordinator.store_history): here a coordinator stops with its data
folder kept, another one deletes streams of its partitions and compaction removes their
tombstones, or the changelog topic is re-created; then the partitions come back. Nothing deleted
comes back, and the store holds exactly what the changelog does.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from streams.coordinator.confluent.rocks import STREAMS, PartitionStore
from streams.coordinator.processor import partition_of
from streams.kafka.admin import create_topics
from streams.kafka.settings import KafkaSettings
from streams.topics import Topics
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Feed, Responder, Tail

pytestmark = pytest.mark.broker

PARTITIONS = 2
WINDOW = 1000
CONFIG = {
    "window_ms": WINDOW,
    "step_ms": WINDOW,
    "max_in_flight": 4,
    "task_timeout_ms": 5000,
    "bypass_after_ms": 600_000,
    "retry": {"strategy": "immediate"},
    "gc_grace_ms": 1,  # a deleted stream is collected (tombstoned) at once
}
# Compaction as soon as it can: segments roll every 200 ms of writes, any dirt is cleaned, and
# a tombstone goes 100 ms after its first cleaning (the broker's cleaner wakes every 15 s idle).
COMPACT_NOW = {"segment.ms": "200", "delete.retention.ms": "100",
               "min.cleanable.dirty.ratio": "0.01"}  # fmt: skip


def ack_all(task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "ack", {"ack_ms": task["end_ms"]}


def named(prefix: str, per_partition: int) -> list[str]:
    """Stream ids, `per_partition` on each partition."""
    found: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    i = 0
    while any(len(ids) < per_partition for ids in found.values()):
        s = f"{prefix}{i}"
        ids = found[partition_of(s.encode(), PARTITIONS)]
        if len(ids) < per_partition:
            ids.append(s)
        i += 1
    return [s for ids in found.values() for s in ids]


class Cluster:
    """Coordinators `a` and `b` over one prefix, a stand-in worker, and a tail of `tasks`."""

    def __init__(self, kafka: KafkaSettings, unique: str, home: Path, kind: str) -> None:
        self.kafka, self.home = kafka, home
        self.prefix = f"{kind}-{unique}"
        self.topics = Topics(self.prefix)
        self.feed = Feed(kafka, self.prefix)
        self.a, self.b = (
            CoordinatorProcess(kafka, self.prefix, home / n, home / f"{n}.log", PARTITIONS)
            for n in "ab"
        )
        self.responder = Responder(kafka, self.prefix, f"worker-{unique}", ack_all)
        self.tail = Tail(kafka, self.prefix, ["tasks", "commits"], f"tail-{unique}")
        self.given_back_s = 0.0  # how long `a` took to restore and be ready again

    def create(self, streams: list[str], windows_ago: int) -> None:
        now = time.time_ns() // 1_000_000
        start = now - now % WINDOW - windows_ago * WINDOW
        for s in streams:
            self.feed.upsert(s, start, **CONFIG)

    def wait_progress(self, streams: list[str]) -> None:
        self.tail.wait_for(
            "a commit of every stream",
            lambda: all(self.tail.values("commits", s) for s in streams),
            60,
        )

    def changelog(self) -> dict[bytes, bytes]:
        """The changelog's latest committed value of each `streams` key, tombstones applied."""
        latest: dict[bytes, bytes] = {}
        for key, value in read_all(self.kafka, self.topics.eos_changelog):
            if key.startswith(STREAMS):
                if value is None:
                    latest.pop(key, None)
                else:
                    latest[key] = value
        return latest

    def stored(self, name: str) -> tuple[dict[bytes, bytes], dict[int, int]]:
        """The `streams` table of coordinator `name`'s stores, and each store's offset."""
        table: dict[bytes, bytes] = {}
        offsets = {}
        for p in range(PARTITIONS):
            store = PartitionStore(self.home / name / "eos" / f"partition-{p}")
            table.update(store.items(STREAMS))
            offsets[p] = store.offset
            store.close()
        return table, offsets

    def alter_changelog(self, config: dict[str, str]) -> None:
        from confluent_kafka.admin import (  # type: ignore[attr-defined]  # missing in its stub
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
        )

        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in config.items()]  # fmt: skip
        resource = ConfigResource("topic", self.topics.eos_changelog, incremental_configs=entries)
        client = AdminClient(self.kafka.librdkafka())
        for future in client.incremental_alter_configs([resource]).values():
            future.result(30)

    def give_back_to_a(self) -> None:
        """Stop `b` and start `a` again, over the data folder it kept."""
        self.b.stop()
        began = time.monotonic()
        self.a.start().wait_ready(partitions=PARTITIONS)
        self.given_back_s = time.monotonic() - began

    def check_a_holds_the_changelog(self, live: list[str], gone: list[str]) -> None:
        """After `a` stops: its stores hold exactly the changelog's latest values."""
        doc = self.a.health()
        assert doc is not None and doc["indexed_streams"] == len(live), (doc, self.a.tail())
        self.a.stop()
        table, _ = self.stored("a")
        back = sorted(k.decode() for k in table if k[len(STREAMS) :].decode() in gone)
        assert not back, f"deleted streams came back in a's store: {back}"
        assert table == self.changelog()
        assert sorted(k[len(STREAMS) :].decode() for k in table) == sorted(live)

    def close(self) -> None:
        self.tail.close()
        self.a.kill()
        self.b.kill()


def read_all(kafka: KafkaSettings, topic: str) -> list[tuple[bytes, bytes | None]]:
    """Every committed record of `topic` in order per partition: (key, value or None)."""
    consumer = Consumer(kafka.consumer(**{"group.id": "check", "enable.partition.eof": True,
                                          "isolation.level": "read_committed"}))  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out: list[tuple[bytes, bytes | None]] = []
    ended: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(ended) < PARTITIONS:
            assert time.monotonic() < deadline, f"{topic} not read to its end in 30 s"
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is not None:
                    ended.add(msg.partition() or 0)
                else:
                    out.append((msg.key() or b"", msg.value()))
    finally:
        consumer.close()
    return out


def test_streams_deleted_while_a_store_was_away_stay_deleted_after_compaction(
    kafka: KafkaSettings, unique: str, tmp_path: Path
) -> None:
    run = Cluster(kafka, unique, tmp_path, "compacted")
    live, gone = named("live-", 2), named("gone-", 3)
    try:
        with run.responder:
            run.a.start().wait_ready(partitions=PARTITIONS)
            run.create(live + gone, windows_ago=3)
            run.wait_progress(live + gone)
            run.a.stop()
            held, _ = run.stored("a")
            assert all(STREAMS + s.encode() in held for s in gone)

            run.b.start().wait_ready(partitions=PARTITIONS)
            run.alter_changelog(COMPACT_NOW)
            for s in gone:
                run.feed.send("control", {"type": "delete", "stream_id": s})
            keys = {STREAMS + s.encode() for s in gone}

            def compacted() -> bool:  # not a record of the deleted streams left: no tombstone
                return not keys & {key for key, _ in read_all(kafka, run.topics.eos_changelog)}

            run.tail.wait_for("compaction to remove the deleted streams' tombstones",
                              compacted, 90)  # fmt: skip
            run.give_back_to_a()
            since = len(run.tail.values("tasks"))
            time.sleep(2)  # a stream wrongly alive would be dispatched at once (3 s behind)
            run.tail.poll()
            again = [t for t in run.tail.values("tasks")[since:] if t["stream_id"] in gone]
            assert not again, f"deleted streams dispatched again: {again[:3]}"
        run.check_a_holds_the_changelog(live, gone)
    finally:
        run.close()


def test_a_store_of_a_re_created_changelog_is_not_reused_when_the_new_one_grew_past_it(
    kafka: KafkaSettings, unique: str, tmp_path: Path
) -> None:
    run = Cluster(kafka, unique, tmp_path, "recreated")
    old, new = named("old-", 1), named("new-", 4)
    topic = run.topics.eos_changelog
    try:
        with run.responder:
            run.a.start().wait_ready(partitions=PARTITIONS)
            run.create(old, windows_ago=2)
            run.wait_progress(old)
            run.a.stop()
            _, offsets = run.stored("a")

            spec = next(s for s in run.topics.specs(PARTITIONS, 1) if s.name == topic)
            admin = AdminClient(kafka.librdkafka())
            admin.delete_topics([topic])[topic].result(30)
            run.tail.wait_for("the changelog to be made again", lambda: create_topics(
                kafka, [spec]) == [topic], 30)  # fmt: skip

            run.b.start().wait_ready(partitions=PARTITIONS)
            run.create(new, windows_ago=10)  # the new history's writes outnumber the old's

            def grown() -> bool:
                consumer = Consumer(kafka.consumer(**{"group.id": "check"}))
                try:
                    return all(
                        consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
                        > offsets[p] + 1
                        for p in range(PARTITIONS)
                    )
                finally:
                    consumer.close()

            run.tail.wait_for("the new changelog to grow past a's offsets", grown, 60)
            run.wait_progress(new)
            run.give_back_to_a()
        run.check_a_holds_the_changelog(new, old)
    finally:
        run.close()


def test_the_store_of_a_partition_revoked_by_a_rebalance_is_deleted_after_the_delay(
    kafka: KafkaSettings, unique: str, tmp_path: Path
) -> None:
    """TIDEMARK_STATE_CLEANUP_DELAY_MS (Kafka Streams' state.cleanup.delay.ms), here 1 s."""
    run = Cluster(kafka, unique, tmp_path, "cleanup")
    run.a.env["TIDEMARK_STATE_CLEANUP_DELAY_MS"] = "1000"
    folders = tmp_path / "a" / "eos"
    try:
        run.a.start().wait_ready(partitions=PARTITIONS)
        assert sorted(p.name for p in folders.iterdir()) == ["partition-0", "partition-1"]
        run.b.start().wait_ready(partitions=1)
        kept = [f"partition-{p}" for p in run.a.wait_ready(partitions=1)["partitions"]]
        run.tail.wait_for(
            "a's store of the partition b took to be deleted",
            lambda: sorted(p.name for p in folders.iterdir()) == kept,
            20,
        )
    finally:
        run.close()
