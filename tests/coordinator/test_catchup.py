"""The engine's half of takeover grace: when a partition has read `results` far enough."""

from __future__ import annotations

from streams.coordinator.catchup import CatchUp


def _catch_up() -> tuple[CatchUp, list[int]]:
    told: list[int] = []
    return CatchUp(told.append), told


def test_nothing_waiting_is_caught_up_at_once() -> None:
    c, told = _catch_up()
    c.expect(c.assigned(), 3, resume_at=40, end=40)
    assert told == [3] and c.pending == {}


def test_caught_up_once_the_read_reaches_the_end_at_assignment() -> None:
    c, told = _catch_up()
    c.expect(c.assigned(), 1, resume_at=10, end=15)
    c.reached(1, 14)
    assert told == []
    c.reached(1, 15)
    c.reached(1, 16)  # said once
    assert told == [1] and c.pending == {}


def test_figures_of_a_superseded_assignment_are_ignored() -> None:
    c, told = _catch_up()
    old = c.assigned()
    new = c.assigned()
    c.expect(old, 2, resume_at=5, end=5)
    assert told == []
    c.expect(new, 2, resume_at=5, end=9)
    assert c.pending == {2: 9}


def test_a_revoked_partition_is_forgotten() -> None:
    c, told = _catch_up()
    c.expect(c.assigned(), 0, resume_at=0, end=100)
    c.forget([0])
    c.reached(0, 100)
    assert told == [] and c.pending == {}
