"""The stall rule of streams.kafka.progress, over hand-made positions and ends (no broker)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from confluent_kafka import TopicPartition

from streams.kafka import progress as progress_module
from streams.kafka.progress import KafkaProgress, ProgressWatch, Stall, out_of_group
from streams.kafka.settings import KafkaSettings

T = ("t", 0)
U = ("t", 1)


def test_a_consumer_that_reads_what_arrives_is_never_stalled() -> None:
    watch = ProgressWatch(bound_ms=1000)
    for i in range(10):
        assert watch.observe({T: i * 10}, {T: i * 10 + 5}, now_ms=i * 800) is None


def test_no_progress_while_the_end_moves_on_is_a_stall_once_the_bound_passed() -> None:
    watch = ProgressWatch(bound_ms=1000)
    assert watch.observe({T: 10, U: 4}, {T: 10, U: 4}, now_ms=0) is None
    assert watch.observe({T: 10, U: 4}, {T: 15, U: 4}, now_ms=500) is None  # records arrive
    assert watch.observe({T: 10, U: 4}, {T: 20, U: 4}, now_ms=1200) is None  # 700 ms behind
    stall = watch.observe({T: 10, U: 4}, {T: 20, U: 4}, now_ms=1500)
    assert stall == Stall(idle_ms=1500, behind={T: (10, 20)})
    assert stall.describe() == "no progress for 1500 ms while records wait: t[0] at 10 of 20"
    # Renewed: it counts afresh, and reading again clears it.
    watch.reset(1600)
    assert watch.observe({T: 10, U: 4}, {T: 20, U: 4}, now_ms=1700) is None
    assert watch.observe({T: 20, U: 4}, {T: 20, U: 4}, now_ms=3000) is None


def test_an_end_that_does_not_move_is_no_stall() -> None:
    # A transaction marker past the last record, or an end held by an open transaction.
    watch = ProgressWatch(bound_ms=1000)
    assert watch.observe({T: 10}, {T: 11}, now_ms=0) is None
    assert watch.observe({T: 10}, {T: 11}, now_ms=60_000) is None
    # ... until records come after a long quiet: the bound counts from their arrival.
    assert watch.observe({T: 10}, {T: 30}, now_ms=61_000) is None
    assert watch.observe({T: 10}, {T: 31}, now_ms=61_900) is None
    assert watch.observe({T: 10}, {T: 31}, now_ms=62_000) == Stall(62_000, {T: (10, 31)})


def test_an_end_first_seen_after_the_last_progress_is_a_baseline_not_a_move() -> None:
    # The ends asked for before a rebalance gave it U; U is empty and nothing is read (-1).
    watch = ProgressWatch(bound_ms=1000)
    assert watch.observe({T: -1, U: -1}, {T: 0}, now_ms=0) is None
    assert watch.observe({T: -1, U: -1}, {T: 0, U: 0}, now_ms=500) is None
    assert watch.observe({T: -1, U: -1}, {T: 0, U: 0}, now_ms=60_000) is None  # was a stall
    # Records arriving on U after that are a move, and a stall once the bound passed.
    assert watch.observe({T: -1, U: -1}, {T: 0, U: 3}, now_ms=61_000) is None
    assert watch.observe({T: -1, U: -1}, {T: 0, U: 3}, now_ms=62_000) == Stall(62_000, {U: (-1, 3)})


def test_a_caught_up_consumer_is_idle_not_stalled() -> None:
    watch = ProgressWatch(bound_ms=1000)
    assert watch.observe({T: 10}, {T: 10}, now_ms=0) is None
    assert watch.observe({T: 10}, {T: 10}, now_ms=50_000) is None
    assert watch.observe({T: 10}, {T: 12}, now_ms=50_500) is None
    assert watch.observe({T: 12}, {T: 12}, now_ms=50_600) is None


def test_no_assignment_for_longer_than_the_bound_is_a_stall_when_one_is_expected() -> None:
    watch = ProgressWatch(bound_ms=1000)
    assert watch.observe({T: 3}, {T: 3}, now_ms=0) is None
    assert watch.observe({}, {}, now_ms=100) is None  # revoked: counts from here
    assert watch.observe({}, {}, now_ms=1000) is None
    stall = watch.observe({}, {}, now_ms=1100)
    assert stall == Stall(1000, {}, unassigned=True)
    assert stall.describe() == "no partition assigned for 1000 ms"
    assert watch.observe({}, {}, now_ms=5000, expect_assignment=False) is None


def test_a_member_with_no_partition_is_owed_some_only_while_out_of_its_group() -> None:
    # librdkafka's statistics: cgrp.state and cgrp.join_state
    assert not out_of_group("up", "steady")  # in the group: it may rightly have none
    assert out_of_group("up", "wait-join")  # its join request never answered
    assert out_of_group("wait-coord", "init")  # no group coordinator found
    assert out_of_group("None", "None")  # no statistics of a group


class _Done:
    """A settled future."""

    def __init__(self, value: object) -> None:
        self.value = value

    def done(self) -> bool:
        return True

    def exception(self) -> None:
        return None

    def result(self) -> object:
        return self.value


class _Failed:
    """A future settled with an error: no broker answered."""

    def done(self) -> bool:
        return True

    def exception(self) -> Exception:
        return RuntimeError("KafkaError{code=_TRANSPORT}")

    def result(self) -> object:
        raise RuntimeError("KafkaError{code=_TRANSPORT}")


class _Admin:
    """Answers ListOffsets with `ends`, and DescribeCluster if `up`, else fails both."""

    ends: ClassVar[dict[tuple[str, int], int]] = {}
    up: ClassVar[bool] = True

    def __init__(self, _config: object) -> None:
        pass

    def list_offsets(self, request: dict[TopicPartition, object], **_: object) -> dict[Any, Any]:
        return {
            tp: _Done(SimpleNamespace(offset=self.ends[(tp.topic, tp.partition)]))
            if self.up
            else _Failed()
            for tp in request
        }

    def describe_cluster(self, **_: object) -> Any:
        return _Done(SimpleNamespace(nodes=[1])) if self.up else _Failed()


class _Consumer:
    def __init__(self, positions: dict[tuple[str, int], int]) -> None:
        self.positions = positions

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, p in self.positions]

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.positions[(tp.topic, tp.partition)])
                for tp in tps]  # fmt: skip


def _looks(
    progress: KafkaProgress, consumer: _Consumer, times_ms: list[int], state: tuple[str, str]
) -> list[Any]:
    """One check per time, each asking (even steps) or taking the answer (odd steps)."""
    return [
        progress.check(consumer, group_state=state, now_ms=t)  # type: ignore[arg-type]
        for t in times_ms
    ]


def test_the_kafka_adapter_asks_for_ends_and_membership_and_applies_the_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress_module, "AdminClient", _Admin)
    progress = KafkaProgress(KafkaSettings(), bound_ms=1000, every_ms=100)
    wedged = _Consumer({T: 5})
    steady = ("up", "steady")
    _Admin.ends = {T: 5}
    assert _looks(progress, wedged, [0, 50], steady) == [None, None]  # asked, answered: caught up
    _Admin.ends = {T: 9}
    assert _looks(progress, wedged, [200, 250, 1200, 1250], steady) == [
        None, None, None, Stall(1200, {T: (5, 9)})
    ]  # fmt: skip
    # No partition: rightly idle in its group (steady), owed some out of it (wait-join).
    progress.renewed(2000)
    alone = _Consumer({})
    assert _looks(progress, alone, [2100, 2150, 3200, 3250], steady) == [None] * 4
    stuck = ("up", "wait-join")
    assert _looks(progress, alone, [3300, 3350], stuck)[1] == Stall(1350, {}, unassigned=True)


def test_no_partition_is_no_stall_while_no_broker_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A member out of its group because every broker is gone is waiting, not stalled: a
    renewal would only make a new client that waits the same (the worker renewed its consumer
    every 30 s through a 90 s outage). With no partition to ask ends for, a broker's answer to
    DescribeCluster is the fact the verdict needs."""
    monkeypatch.setattr(progress_module, "AdminClient", _Admin)
    monkeypatch.setattr(_Admin, "up", False)
    progress = KafkaProgress(KafkaSettings(), bound_ms=1000, every_ms=100)
    alone, stuck = _Consumer({}), ("up", "wait-join")
    times = list(range(0, 5000, 50))
    assert _looks(progress, alone, times, stuck) == [None] * len(times)
    # The brokers are back and it is still out of its group: a stall, a bound after they answered.
    monkeypatch.setattr(_Admin, "up", True)
    verdicts = _looks(progress, alone, list(range(5000, 6500, 50)), stuck)
    stalls = [(5000 + 50 * i, v) for i, v in enumerate(verdicts) if v is not None]
    assert stalls and stalls[0][1].unassigned
    assert 5900 <= stalls[0][0] <= 6300, stalls  # the bound counts from the last failed look
