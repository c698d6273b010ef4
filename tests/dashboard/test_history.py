"""The timeline's bounded read of `commits` (streams.dashboard.history) over a fake partition tail:
the stream's partition only, its last `tail_records` records, read on incrementally."""

from __future__ import annotations

from dataclasses import dataclass, field

from streams.core import Commit, CommittedWindow
from streams.dashboard.history import KafkaCommitHistory
from streams.errors import BrokerUnavailable
from streams.kafka.partitioner import partition_of
from streams.kafka.settings import KafkaSettings
from streams.kafka.topic_io import TopicRecord
from streams.wire import encode_commit

T0 = 1_795_946_400_000
MIN = 60_000
PARTITIONS = 4


@dataclass
class FakeTail:
    """Partitions of records (offset = index); `reads` records every (partition, start, end)."""

    partitions: dict[int, list[tuple[bytes, bytes]]] = field(default_factory=dict)
    reads: list[tuple[int, int, int]] = field(default_factory=list)
    fail: bool = False
    per_read: int | None = None  # at most this many records per read (a slow broker)
    closed: bool = False

    def bounds(self, timeout_s: float) -> dict[int, tuple[int, int]]:
        if self.fail:
            raise BrokerUnavailable("Kafka did not answer: timed out")
        return {p: (0, len(self.partitions.get(p, []))) for p in range(PARTITIONS)}

    def read(
        self, partition: int, start: int, end: int, timeout_s: float
    ) -> tuple[list[TopicRecord], int]:
        self.reads.append((partition, start, end))
        stop = end if self.per_read is None else min(end, start + self.per_read)
        records = self.partitions.get(partition, [])[start:stop]
        out = [
            TopicRecord("commits", partition, start + i, None, key, value)
            for i, (key, value) in enumerate(records)
        ]
        return out, stop

    def close(self) -> None:
        self.closed = True

    def commit(self, stream_id: str, minute: int) -> None:
        window = CommittedWindow(T0 + minute * MIN, T0 + (minute + 1) * MIN, "ack", 1)
        value = encode_commit(
            Commit(stream_id, window.end_ms, window.start_ms, window.end_ms + 5, (window,))
        )
        p = partition_of(stream_id.encode(), PARTITIONS)
        self.partitions.setdefault(p, []).append((stream_id.encode(), value))


def history(tail: FakeTail, **bounds: int) -> KafkaCommitHistory:
    return KafkaCommitHistory(KafkaSettings("127.0.0.1:1"), "tm.commits", tail=tail, **bounds)


def starts(stream_windows: tuple[tuple[CommittedWindow, int], ...]) -> list[int]:
    return [(window.start_ms - T0) // MIN for window, _ in stream_windows]


def two_streams_on_one_partition() -> tuple[str, str]:
    first = "orders"
    p = partition_of(first.encode(), PARTITIONS)
    other = next(f"s{i}" for i in range(1000) if partition_of(f"s{i}".encode(), PARTITIONS) == p)
    return first, other


def test_only_the_streams_partition_is_read_and_only_its_key_kept() -> None:
    mine, neighbour = two_streams_on_one_partition()
    tail = FakeTail()
    for minute in range(3):
        tail.commit(mine, minute)
        tail.commit(neighbour, minute)
    tail.partitions[partition_of(mine.encode(), PARTITIONS)].append((mine.encode(), b"{bad"))
    recent = history(tail).recent(mine)
    p = partition_of(mine.encode(), PARTITIONS)
    assert tail.reads == [(p, 0, 7)]
    assert starts(recent.windows) == [0, 1, 2]
    assert recent.windows[0][1] == T0 + MIN + 5  # with its commit's committed_ms
    assert (recent.partition, recent.from_offset, recent.to_offset) == (p, 0, 7)
    assert (recent.records_read, recent.complete, recent.error) == (7, True, None)


def test_the_read_is_bounded_to_the_last_tail_records_of_the_partition() -> None:
    mine, neighbour = two_streams_on_one_partition()
    tail = FakeTail()
    for minute in range(100):
        tail.commit(neighbour, minute)
        tail.commit(mine, minute)
    recent = history(tail, tail_records=20).recent(mine)
    assert tail.reads == [(partition_of(mine.encode(), PARTITIONS), 180, 200)]
    assert starts(recent.windows) == list(range(90, 100))
    assert (recent.records_read, recent.limit) == (20, 20)


def test_a_stream_asked_for_again_is_read_on_from_where_it_stopped() -> None:
    mine, _ = two_streams_on_one_partition()
    tail = FakeTail()
    tail.commit(mine, 0)
    commits = history(tail)
    commits.recent(mine)
    tail.commit(mine, 1)
    recent = commits.recent(mine)
    p = partition_of(mine.encode(), PARTITIONS)
    assert tail.reads == [(p, 0, 1), (p, 1, 2)]
    assert starts(recent.windows) == [0, 1]


def test_a_read_cut_short_says_so_and_the_next_goes_on() -> None:
    mine, _ = two_streams_on_one_partition()
    tail = FakeTail(per_read=2)
    for minute in range(5):
        tail.commit(mine, minute)
    commits = history(tail)
    first = commits.recent(mine)
    assert (starts(first.windows), first.complete) == ([0, 1], False)
    commits.recent(mine)
    last = commits.recent(mine)
    assert (starts(last.windows), last.complete) == ([0, 1, 2, 3, 4], True)


def test_a_long_absence_skips_to_the_tail_and_keeps_what_it_had() -> None:
    mine, _ = two_streams_on_one_partition()
    tail = FakeTail()
    tail.commit(mine, 0)
    commits = history(tail, tail_records=3)
    commits.recent(mine)
    for minute in range(1, 10):
        tail.commit(mine, minute)
    recent = commits.recent(mine)
    assert tail.reads[-1][1:] == (7, 10)
    assert starts(recent.windows) == [0, 7, 8, 9]  # the timeline marks the gap
    assert recent.from_offset == 7


def test_only_a_few_streams_and_windows_are_kept() -> None:
    tail = FakeTail()
    for minute in range(10):
        tail.commit("orders", minute)
    commits = history(tail, keep_streams=2, keep_windows=4)
    assert starts(commits.recent("orders").windows) == [6, 7, 8, 9]
    commits.recent("a")
    commits.recent("b")  # "orders" is forgotten: read anew from the tail
    commits.recent("orders")
    assert tail.reads[-1][1] == 0


def test_a_broker_error_is_in_the_answer_not_raised() -> None:
    tail = FakeTail(fail=True)
    commits = history(tail)
    recent = commits.recent("orders")
    assert recent.windows == () and recent.error == "Kafka did not answer: timed out"
    commits.close()
    assert tail.closed


def test_no_commits_topic_yet_reads_nothing() -> None:
    class Missing(FakeTail):
        def bounds(self, timeout_s: float) -> dict[int, tuple[int, int]]:
            return {}

    tail = Missing()
    recent = history(tail).recent("orders")
    assert (recent.windows, recent.partition, tail.reads) == ((), None, [])
