"""consumer_lag on the real broker: committed offsets against the high and low watermarks."""

from __future__ import annotations

import time
from concurrent.futures import Future

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import ConsumerGroupListing, ListConsumerGroupsResult

from streams.dev.broker import free_port
from streams.errors import BrokerUnavailable
from streams.kafka.admin import admin_client, create_topics
from streams.kafka.lag import LagReader, LagRow, consumer_lag
from streams.kafka.settings import KafkaSettings
from streams.topics import TopicSpec

pytestmark = pytest.mark.broker

PRODUCED = {0: 10, 1: 6}


def produce(kafka: KafkaSettings, topic: str) -> None:
    create_topics(kafka, [TopicSpec(topic, len(PRODUCED))])
    producer = Producer(kafka.producer())
    for partition, count in PRODUCED.items():
        for i in range(count):
            producer.produce(topic, f"v{i}".encode(), partition=partition)
    assert producer.flush(10) == 0


def consume_and_commit(
    kafka: KafkaSettings, topic: str, group: str, counts: dict[int, int]
) -> None:
    """Read `counts[p]` records of each partition p and commit the offset after them."""
    consumer = Consumer(kafka.librdkafka(**{"group.id": group, "enable.auto.commit": False}))
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in counts])
        seen = dict.fromkeys(counts, 0)
        deadline = time.monotonic() + 20
        while any(seen[p] < n for p, n in counts.items()) and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                if msg.error() is None:
                    seen[msg.partition()] += 1
        assert all(seen[p] >= n for p, n in counts.items()), seen
        offsets = [TopicPartition(topic, p, n) for p, n in counts.items() if n]
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


def test_lag_is_produced_minus_committed_per_partition(kafka: KafkaSettings, unique: str) -> None:
    topic, group = f"lag-{unique}", f"lagtest-{unique}-a"
    produce(kafka, topic)
    consume_and_commit(kafka, topic, group, {0: 4, 1: 6})
    consume_and_commit(kafka, topic, f"other-{unique}", {0: 1})  # not under the prefix

    assert consumer_lag(kafka, f"lagtest-{unique}") == [
        LagRow(group, topic, 0, committed=4, high_watermark=10, lag=6),
        LagRow(group, topic, 1, committed=6, high_watermark=6, lag=0),
    ]


def test_several_prefixes_and_partitions_never_committed(kafka: KafkaSettings, unique: str) -> None:
    topic = f"lag-{unique}"
    produce(kafka, topic)
    consume_and_commit(kafka, topic, f"a-{unique}", {0: 10})
    consume_and_commit(kafka, topic, f"b-{unique}", {1: 2})
    reader = LagReader(kafka, (f"a-{unique}", f"b-{unique}"))

    rows = {(r.group, r.partition): r.lag for r in reader()}
    assert rows == {(f"a-{unique}", 0): 0, (f"b-{unique}", 1): 4}
    assert reader() == reader()  # the reader keeps its client between calls


def test_records_deleted_below_the_committed_offset_are_not_lag(
    kafka: KafkaSettings, unique: str
) -> None:
    topic, group = f"lag-{unique}", f"lagtest-{unique}"
    produce(kafka, topic)
    consume_and_commit(kafka, topic, group, {0: 1})
    admin = admin_client(kafka)
    for future in admin.delete_records([TopicPartition(topic, 0, 3)]).values():
        future.result(10)

    (row,) = consumer_lag(kafka, group, admin=admin)
    assert (row.committed, row.high_watermark, row.lag) == (1, 10, 7)  # 3..9 are left to read


def test_an_unreachable_cluster_is_reported_within_the_timeout() -> None:
    dead = KafkaSettings(f"127.0.0.1:{free_port()}")
    began = time.monotonic()
    with pytest.raises(BrokerUnavailable, match="consumer lag"):
        consumer_lag(dead, "tidemark-", timeout_s=1.0)
    assert time.monotonic() - began < 5


class PartlyAnsweringAdmin:
    """An AdminClient whose group listing comes back with one broker's error beside a group."""

    def list_consumer_groups(self, request_timeout: float) -> Future[ListConsumerGroupsResult]:
        future: Future[ListConsumerGroupsResult] = Future()
        listing = ConsumerGroupListing("tidemark-a", is_simple_consumer_group=False)
        future.set_result(
            ListConsumerGroupsResult(valid=[listing], errors=[KafkaError(KafkaError._TIMED_OUT)])
        )
        return future


def test_a_group_listing_with_errors_is_reported_not_taken_as_complete() -> None:
    # librdkafka answers a listing that timed out with ``errors`` and no exception: a lag read
    # from the partial list would leave groups out without a word (CI saw it return []).
    admin = PartlyAnsweringAdmin()
    with pytest.raises(BrokerUnavailable, match=r"consumer lag: .*Timed out"):
        consumer_lag(KafkaSettings("127.0.0.1:9"), "tidemark-", admin=admin)  # type: ignore[arg-type]
