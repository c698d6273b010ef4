"""The stall rule of streams.kafka.progress, over hand-made positions and ends (no broker)."""

from __future__ import annotations

from streams.kafka.progress import ProgressWatch, Stall

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
