"""confluent-kafka against the real broker: round trip, partitioner agreement, transactions."""

from __future__ import annotations

import time

import pytest
from aiokafka.partitioner import DefaultPartitioner
from confluent_kafka import Consumer, Producer

from streams.kafka.admin import create_topics
from streams.kafka.settings import KafkaSettings
from streams.topics import TopicSpec

pytestmark = pytest.mark.broker


def _consume(kafka: KafkaSettings, topic: str, group: str, count: int, **extra: object) -> list:
    consumer = Consumer(
        kafka.librdkafka(**{"group.id": group, "auto.offset.reset": "earliest", **extra})
    )
    consumer.subscribe([topic])
    messages = []
    deadline = time.monotonic() + 30
    try:
        while len(messages) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                messages.append(msg)
    finally:
        consumer.close()
    return messages


def test_round_trip_through_six_partitions(kafka: KafkaSettings, unique: str) -> None:
    topic = f"roundtrip-{unique}"
    create_topics(kafka, [TopicSpec(topic, 6)])
    producer = Producer(kafka.producer())
    sent = {f"key-{i}".encode(): f"value-{i}".encode() for i in range(300)}
    for key, value in sent.items():
        producer.produce(topic, value, key)
    assert producer.flush(15) == 0

    received = _consume(kafka, topic, f"g-{unique}", len(sent))

    assert {m.key(): m.value() for m in received} == sent
    assert {m.partition() for m in received} == set(range(6))


def test_murmur2_random_agrees_with_aiokafka_default_partitioner(
    kafka: KafkaSettings, unique: str
) -> None:
    topic = f"partitioner-{unique}"
    create_topics(kafka, [TopicSpec(topic, 6)])
    producer = Producer(kafka.producer())
    placed: dict[bytes, int] = {}

    def on_delivery(err: object, msg: object) -> None:
        assert err is None, err
        placed[msg.key()] = msg.partition()  # type: ignore[attr-defined]

    keys = [f"stream-{i}".encode() for i in range(1000)]
    for key in keys:
        producer.produce(topic, b"x", key, on_delivery=on_delivery)
    assert producer.flush(15) == 0

    aiokafka_partition = DefaultPartitioner()
    partitions = list(range(6))
    expected = {key: aiokafka_partition(key, partitions, partitions) for key in keys}
    assert placed == expected


def test_transactions_visible_to_read_committed_only_when_committed(
    kafka: KafkaSettings, unique: str
) -> None:
    topic = f"txn-{unique}"
    create_topics(kafka, [TopicSpec(topic, 3)])
    producer = Producer(kafka.producer(**{"transactional.id": f"txn-{unique}"}))
    producer.init_transactions(30)

    producer.begin_transaction()
    producer.produce(topic, b"aborted", b"k")
    assert producer.flush(15) == 0  # written to the log, so the abort has something to hide
    producer.abort_transaction(30)

    producer.begin_transaction()
    producer.produce(topic, b"committed", b"k")
    producer.commit_transaction(30)

    # A marker after both, so we know when the consumer has read far enough.
    plain = Producer(kafka.producer())
    plain.produce(topic, b"end", b"k")
    assert plain.flush(60) == 0, "records left unsent after 60 s"

    committed = _consume(kafka, topic, f"rc-{unique}", 2, **{"isolation.level": "read_committed"})
    uncommitted = _consume(
        kafka, topic, f"ru-{unique}", 3, **{"isolation.level": "read_uncommitted"}
    )
    assert [m.value() for m in committed] == [b"committed", b"end"]
    assert [m.value() for m in uncommitted] == [b"aborted", b"committed", b"end"]
