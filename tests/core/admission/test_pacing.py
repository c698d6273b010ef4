"""The pacer: slow start to the cap, halving on failure, never above the cap (property)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.admission import Pacer

T0 = 1_795_946_400_000


def test_not_pacing_until_a_recovery_starts() -> None:
    pacer = Pacer(cap=20)
    assert not pacer.active and pacer.limit() is None
    pacer.success(100)
    pacer.failure()
    assert pacer.limit() is None


def test_slow_start_doubles_per_round_of_answers_until_the_cap() -> None:
    pacer = Pacer(cap=20, pace_start=4)
    pacer.start(T0)
    assert pacer.active and pacer.limit() == 4 and pacer.started_ms == T0
    rounds = []
    while pacer.active:
        for _ in range(pacer.limit() or 0):  # a round: every task in flight answers
            pacer.success(demand=300)
        rounds.append(pacer.limit())
    assert rounds == [8, 16, None]  # 16 + 16 answers reach the cap: paced no more


def test_a_failure_halves_and_later_growth_is_one_per_round() -> None:
    pacer = Pacer(cap=100, pace_start=4)
    pacer.start(T0)
    for _ in range(4 + 8):
        pacer.success(300)
    assert pacer.limit() == 16
    pacer.failure()
    assert pacer.limit() == 8 and pacer.threshold == 8
    for _ in range(8):  # above the threshold: +1/level per answer, about +1 per round
        pacer.success(300)
    assert pacer.limit() == 8 and 8.9 < pacer.level < 9.0
    for _ in range(10):
        pacer.failure()
    assert pacer.limit() == 1  # never below one


def test_without_a_cap_the_recovery_ends_once_the_level_covers_the_demand() -> None:
    pacer = Pacer(cap=None)
    pacer.start(T0, backlog=6)
    assert pacer.limit() == 4
    pacer.success(demand=50)
    assert pacer.limit() == 5
    pacer.success(demand=5)  # 6 covers what is left and the backlog: nothing more to pace
    assert not pacer.active and pacer.limit() is None


def test_without_a_cap_a_backlog_the_start_covers_is_not_paced() -> None:
    """Four held streams and a pace_start of 4: nothing to pace (a coordinator's first
    assignment with four streams due paced them, and the outage's failures then cut it to one
    task at a time)."""
    for backlog in (0, 3, 4):
        pacer = Pacer(cap=None)
        pacer.start(T0, backlog=backlog)
        assert not pacer.active, backlog
    pacer.start(T0, backlog=5)
    assert pacer.active and pacer.limit() == 4


def test_a_start_at_or_above_the_cap_paces_nothing() -> None:
    pacer = Pacer(cap=3, pace_start=4)
    pacer.start(T0)
    assert not pacer.active and pacer.limit() is None


events = st.lists(st.sampled_from(["ok", "fail", "start", "cap"]), max_size=200)


@settings(max_examples=300, deadline=None)
@given(st.none() | st.integers(1, 64), st.integers(1, 16), events, st.integers(0, 100))
def test_the_limit_never_exceeds_the_cap_and_a_failure_halves(
    cap: int | None, pace_start: int, steps: list[str], demand: int
) -> None:
    pacer = Pacer(cap, pace_start)
    for step in steps:
        before = pacer.level
        was_active = pacer.active
        if step == "start":
            pacer.start(T0)
        elif step == "ok":
            pacer.success(demand)
            if was_active:
                assert pacer.level > before
        elif step == "fail":
            pacer.failure()
            if was_active:
                assert pacer.level == max(1.0, before / 2) and pacer.threshold == before / 2
        else:
            pacer.cap = None if pacer.cap is None else max(1, pacer.cap // 2)
            pacer.settle(demand)
        limit = pacer.limit()
        assert (limit is None) == (not pacer.active)
        if limit is not None:
            assert limit >= 1
            if pacer.cap is not None:
                assert limit < pacer.cap
