"""The lag reader without a broker: committed offsets come from a plain Consumer's committed(),
never from the AdminClient's list_consumer_group_offsets (librdkafka#5040: a native crash when
the group coordinator moves)."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import ConsumerGroupListing, ListConsumerGroupsResult

from streams.errors import BrokerUnavailable
from streams.kafka.lag import CommittedOffsets, LagReader, LagRow, backlog, consumer_lag
from streams.kafka.settings import KafkaSettings

SETTINGS = KafkaSettings("127.0.0.1:9")
ENDS = {("t", 0): (0, 10), ("t", 1): (2, 6), ("u", 0): (0, 3)}  # (low, high) watermarks


def done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


class FakeAdmin:
    """Groups, topics and watermarks; list_consumer_group_offsets must not be called."""

    def list_consumer_groups(self, request_timeout: float) -> Future[ListConsumerGroupsResult]:
        listed = [ConsumerGroupListing(g, is_simple_consumer_group=False) for g in ("g-a", "x")]
        return done(ListConsumerGroupsResult(valid=listed, errors=[]))

    def list_topics(self, timeout: float) -> Any:
        def topic(n: int) -> Any:
            return SimpleNamespace(error=None, partitions=dict.fromkeys(range(n)))

        return SimpleNamespace(
            topics={"t": topic(2), "u": topic(1), "__consumer_offsets": topic(1)}
        )

    def list_offsets(self, request: dict[TopicPartition, Any], request_timeout: float) -> Any:
        high = "Latest" in type(next(iter(request.values()))).__name__
        return {
            tp: done(SimpleNamespace(offset=ENDS[(tp.topic, tp.partition)][1 if high else 0]))
            for tp in request
        }

    def list_consumer_group_offsets(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the admin's OffsetFetch crashes natively (librdkafka#5040)")


admins: list[FakeAdmin] = []


def fake_admin(settings: KafkaSettings) -> Any:
    admins.append(FakeAdmin())
    return admins[-1]


class FakeConsumer:
    """A consumer of one group: committed offsets, and whether it was closed."""

    made: ClassVar[list[FakeConsumer]] = []
    committed_offsets: ClassVar[dict[tuple[str, int], int]] = {("t", 0): 4, ("t", 1): 1}
    fail: ClassVar[KafkaException | None] = None

    def __init__(self, config: dict[str, Any]) -> None:
        self.config, self.closed = config, False
        self.asked: list[list[TopicPartition]] = []
        FakeConsumer.made.append(self)

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        assert not self.closed
        self.asked.append(partitions)
        if self.fail is not None:
            raise self.fail
        return [
            TopicPartition(tp.topic, tp.partition, self.committed_offsets.get(
                (tp.topic, tp.partition), -1001))
            for tp in partitions
        ]  # fmt: skip

    def close(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def fresh_consumers() -> None:
    FakeConsumer.made = []
    FakeConsumer.fail = None


def test_lag_is_read_from_a_plain_consumer_of_the_group_never_subscribed() -> None:
    offsets = CommittedOffsets(SETTINGS, new_consumer=FakeConsumer)
    rows = consumer_lag(SETTINGS, "g-", admin=FakeAdmin(), offsets=offsets)  # type: ignore[arg-type]
    assert rows == [
        LagRow("g-a", "t", 0, committed=4, high_watermark=10, lag=6),
        LagRow("g-a", "t", 1, committed=1, high_watermark=6, lag=4),  # resumes at the low mark
    ]
    (consumer,) = FakeConsumer.made
    assert consumer.config["group.id"] == "g-a"
    assert consumer.config["enable.auto.commit"] is False
    # Pending transactional offsets must not hold the read (require_stable is read_committed's).
    assert consumer.config["isolation.level"] == "read_uncommitted"
    asked = {(tp.topic, tp.partition) for tp in consumer.asked[0]}
    assert asked == {("t", 0), ("t", 1), ("u", 0)}  # every topic but the internal ones


def test_the_reader_asks_only_for_its_topics_and_keeps_one_consumer_per_group() -> None:
    reader = LagReader(
        SETTINGS, "g-", topics=("t", "gone"), new_consumer=FakeConsumer, new_admin=fake_admin
    )
    assert reader() == reader()
    (consumer,) = FakeConsumer.made
    assert [{tp.topic for tp in asked} for asked in consumer.asked] == [{"t"}, {"t"}]
    reader.close()
    assert consumer.closed


def test_rows_that_vanish_are_believed_only_once_they_stay_gone() -> None:
    """While a group coordinator moves, a read can come back without the group and without an
    error (seen on a 3-node cluster: `[]` between two full reads). The reader says it cannot
    tell for `vanish_confirm_s`, then believes the rows are gone."""
    clock = [100.0]
    reader = LagReader(
        SETTINGS, "g-", topics=("t",), new_consumer=FakeConsumer, new_admin=fake_admin,
        vanish_confirm_s=30.0, monotonic=lambda: clock[0],
    )  # fmt: skip
    full = reader()
    assert {(row.topic, row.partition) for row in full} == {("t", 0), ("t", 1)}
    FakeConsumer.committed_offsets = {("t", 0): 4}  # t[1]'s offset not in the answer
    try:
        with pytest.raises(BrokerUnavailable, match=r"1 partition\(s\) .* missing"):
            reader()
        clock[0] += 29.0
        with pytest.raises(BrokerUnavailable, match="missing"):
            reader()
        clock[0] += 1.0
        assert [(row.topic, row.partition) for row in reader()] == [("t", 0)]  # gone for good
    finally:
        FakeConsumer.committed_offsets = {("t", 0): 4, ("t", 1): 1}
    assert reader() == full  # back: no wait for rows that appear
    reader.close()


def test_a_read_missing_rows_renews_the_clients_for_the_next() -> None:
    """A reader whose rows stayed missing for minutes while new clients read them (a three-node
    run): a read that misses rows closes its consumers and drops its admin client."""
    reader = LagReader(SETTINGS, "g-", topics=("t",), new_consumer=FakeConsumer,
                       new_admin=fake_admin)  # fmt: skip
    admins.clear()
    full = reader()
    FakeConsumer.committed_offsets = {("t", 0): 4}
    try:
        with pytest.raises(BrokerUnavailable, match="missing"):
            reader()
    finally:
        FakeConsumer.committed_offsets = {("t", 0): 4, ("t", 1): 1}
    (first,) = FakeConsumer.made
    assert first.closed
    assert reader() == full
    first, second = FakeConsumer.made  # the next read's consumer is new, and so is its admin
    assert not second.closed and len(admins) == 2
    reader.close()
    assert second.closed


def test_a_failed_committed_read_is_a_broker_error_not_a_crash() -> None:
    FakeConsumer.fail = KafkaException(KafkaError(KafkaError.NOT_COORDINATOR))
    offsets = CommittedOffsets(SETTINGS, new_consumer=FakeConsumer)
    with pytest.raises(BrokerUnavailable, match="consumer lag"):
        consumer_lag(SETTINGS, "g-", admin=FakeAdmin(), offsets=offsets)  # type: ignore[arg-type]
    with pytest.raises(BrokerUnavailable, match="where group 'g-a' stands"):
        backlog(SETTINGS, "g-a", "t", [0, 1], admin=FakeAdmin(), offsets=offsets)  # type: ignore[arg-type]


def test_backlog_reads_the_committed_offsets_through_a_consumer_too() -> None:
    offsets = CommittedOffsets(SETTINGS, new_consumer=FakeConsumer)
    found = backlog(SETTINGS, "g-a", "t", [0, 1], admin=FakeAdmin(), offsets=offsets)  # type: ignore[arg-type]
    assert found == {0: (4, 10), 1: (2, 6)}


class LeaderMovingAdmin(FakeAdmin):
    """Watermarks of one partition fail: NOT_LEADER while its leader moves, or gone."""

    def __init__(self, code: int) -> None:
        self.code = code

    def list_offsets(self, request: dict[TopicPartition, Any], request_timeout: float) -> Any:
        answers = super().list_offsets(request, request_timeout)
        for tp in answers:
            if (tp.topic, tp.partition) == ("t", 1):
                failed: Future[Any] = Future()
                failed.set_exception(KafkaException(KafkaError(self.code)))
                answers[tp] = failed
        return answers


def test_a_partial_answer_is_no_lag_read_unless_the_partition_is_gone() -> None:
    # A row missing for one refresh would look like a partition without lag: the refresh is
    # skipped instead (the collector serves the last full rows). A deleted topic has no lag.
    offsets = CommittedOffsets(SETTINGS, new_consumer=FakeConsumer)
    moving = LeaderMovingAdmin(KafkaError.NOT_LEADER_FOR_PARTITION)
    with pytest.raises(BrokerUnavailable, match="consumer lag"):
        consumer_lag(SETTINGS, "g-", admin=moving, offsets=offsets)  # type: ignore[arg-type]
    gone = LeaderMovingAdmin(KafkaError.UNKNOWN_TOPIC_OR_PART)
    rows = consumer_lag(SETTINGS, "g-", admin=gone, offsets=offsets)  # type: ignore[arg-type]
    assert [(r.topic, r.partition) for r in rows] == [("t", 0)]
    # The backlog at assignment stays lenient: the partitions that answer get their numbers.
    assert backlog(SETTINGS, "g-a", "t", [0, 1], admin=moving, offsets=offsets) == {0: (4, 10)}  # type: ignore[arg-type]


def test_a_committed_offset_answered_with_an_error_is_no_lag_read() -> None:
    class ErringConsumer(FakeConsumer):
        def committed(self, partitions: list[TopicPartition], timeout: float) -> Any:
            answer: list[Any] = super().committed(partitions, timeout)
            first = answer[0]  # TopicPartition.error is read-only: a stand-in with an error
            error = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
            answer[0] = SimpleNamespace(topic=first.topic, partition=first.partition,
                                        offset=first.offset, error=error)  # fmt: skip
            return answer

    offsets = CommittedOffsets(SETTINGS, new_consumer=ErringConsumer)
    with pytest.raises(BrokerUnavailable, match="consumer lag"):
        consumer_lag(SETTINGS, "g-", admin=FakeAdmin(), offsets=offsets)  # type: ignore[arg-type]


def test_the_reader_asks_for_the_topics_named_from_a_prefix_too() -> None:
    """A pipeline's tasks topic is made while the coordinator runs: its workers' lag counts."""
    reader = LagReader(SETTINGS, "g-", topics=("gone",), new_consumer=FakeConsumer,
                       new_admin=fake_admin, topics_prefix="u")  # fmt: skip
    reader()
    (consumer,) = FakeConsumer.made
    assert [{tp.topic for tp in asked} for asked in consumer.asked] == [{"u"}]
    reader.close()
