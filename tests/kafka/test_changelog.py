"""Restoring changelog partitions against the real broker: every committed record of each
partition read from its start offset, in order, aborted ones never, and an end recognised
although transaction markers follow the last record."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from streams.errors import BrokerUnavailable
from streams.kafka.admin import admin_client, create_topics
from streams.kafka.changelog import ChangelogReader
from streams.kafka.settings import KafkaSettings
from streams.topics import TopicSpec

pytestmark = pytest.mark.broker


def _transactional(kafka: KafkaSettings, unique: str) -> Producer:
    producer = Producer(kafka.producer(**{"transactional.id": f"changelog-{unique}"}))
    producer.init_transactions(30)
    return producer


def test_it_reads_every_partition_from_its_start_at_once_and_only_what_committed(
    kafka: KafkaSettings, unique: str
) -> None:
    topic = f"changelog-{unique}"
    create_topics(kafka, [TopicSpec(topic, 4, config={"cleanup.policy": "compact"})])
    producer = _transactional(kafka, unique)
    producer.begin_transaction()
    for partition in (0, 1, 2):
        for i in range(5):
            producer.produce(topic, f"{partition}-{i}".encode(), f"k{i}".encode(), partition)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", b"k0", 1)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, None, b"k4", 2)  # a tombstone
    producer.commit_transaction(30)

    with ChangelogReader(kafka, topic) as reader:
        assert reader.resume_at(0, -1) == 0
        assert reader.resume_at(0, 3) == 4
        assert reader.resume_at(0, 99) is None  # the topic does not hold that: restore whole
        # partition 3 is empty, partition 0 is read from offset 2 on
        read: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
        for partition, entries in reader.read({0: 2, 1: 0, 2: 0, 3: 0}):
            read.setdefault(partition, []).extend(entries)

    assert sorted(read) == [0, 1, 2]
    assert [(o, v) for o, _, v in read[0]] == [(2, b"0-2"), (3, b"0-3"), (4, b"0-4")]
    assert [v for _, _, v in read[1]] == [f"1-{i}".encode() for i in range(5)]  # none aborted
    assert [v for _, _, v in read[2]] == [*(f"2-{i}".encode() for i in range(5)), None]
    assert read[2][-1][1] == b"k4"
    for entries in read.values():
        offsets = [o for o, _, _ in entries]
        assert offsets == sorted(offsets)


def test_nothing_past_a_store_already_at_the_end_is_read(kafka: KafkaSettings, unique: str) -> None:
    topic = f"changelog-{unique}"
    create_topics(kafka, [TopicSpec(topic, 2, config={"cleanup.policy": "compact"})])
    producer = _transactional(kafka, unique)
    producer.begin_transaction()
    producer.produce(topic, b"v", b"k", 0)
    producer.commit_transaction(30)
    with ChangelogReader(kafka, topic) as reader:
        assert list(reader.read({0: 1, 1: 0})) == []  # offset 1 is the commit marker


def test_it_names_the_topic_s_history_and_how_long_its_tombstones_are_kept(
    kafka: KafkaSettings, unique: str
) -> None:
    """A topic deleted and made again under its name is another history (another topic id)."""
    topic = f"changelog-{unique}"
    config = {"cleanup.policy": "compact", "delete.retention.ms": "1234"}
    create_topics(kafka, [TopicSpec(topic, 1, config=config)])
    with ChangelogReader(kafka, topic) as reader:
        first = reader.history
        assert reader.tombstones_kept_ms == 1234
    with ChangelogReader(kafka, topic) as reader:
        assert reader.history == first
    client = admin_client(kafka)
    client.delete_topics([topic], operation_timeout=30)[topic].result(30)
    deadline = time.monotonic() + 30
    while True:  # the deletion ends a moment after the call
        try:
            create_topics(kafka, [TopicSpec(topic, 1, config={"cleanup.policy": "compact"})])
            break
        except BrokerUnavailable:
            assert time.monotonic() < deadline, "the topic was not deleted in 30 s"
            time.sleep(0.5)
    with ChangelogReader(kafka, topic) as reader:
        assert reader.history not in (first, "", "AAAAAAAAAAAAAAAAAAAAAA")
        assert reader.tombstones_kept_ms == 86_400_000  # the broker's default
