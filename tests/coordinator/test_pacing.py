"""When the confluent engine commits (streams.coordinator.confluent.pacing): a burst read over
several polls goes into one transaction, load commits at the interval, and nothing waits for a poll;
and when it stops making aborted transactions again."""

from __future__ import annotations

from streams.coordinator.confluent.pacing import AbortStreak, CommitPacing

INTERVAL_S = 0.1
POLL_S = 0.005


def pacing() -> CommitPacing:
    return CommitPacing(INTERVAL_S, POLL_S)


def test_a_burst_read_over_several_polls_commits_once_after_the_poll_that_finds_nothing() -> None:
    p = pacing()
    assert p.poll_timeout_s(work_left=False) == POLL_S  # idle: wait for inputs
    assert not p.commit_now(338, pending=True, since_commit_s=0.01)  # the burst's first part
    assert p.poll_timeout_s(work_left=False) == 0.0  # the rest, fetched meanwhile, at once
    assert not p.commit_now(662, pending=True, since_commit_s=0.02)
    assert p.poll_timeout_s(work_left=False) == 0.0
    assert p.commit_now(0, pending=True, since_commit_s=0.021)  # dry: one commit for all
    assert p.poll_timeout_s(work_left=False) == POLL_S


def test_under_load_it_commits_at_the_interval_and_never_later() -> None:
    p = pacing()
    assert not p.commit_now(2000, pending=True, since_commit_s=0.05)
    assert not p.commit_now(1, pending=True, since_commit_s=0.0999)  # a trickle: still reading
    assert p.commit_now(2000, pending=True, since_commit_s=INTERVAL_S)
    assert p.commit_now(3, pending=True, since_commit_s=0.5)


def test_nothing_to_commit_commits_nothing() -> None:
    p = pacing()
    assert not p.commit_now(0, pending=False, since_commit_s=10.0)
    assert not p.commit_now(5, pending=False, since_commit_s=10.0)


def test_time_driven_work_alone_commits_at_once() -> None:
    """Dispatches of a tick with no input: the transaction holding them commits in the same step."""
    p = pacing()
    assert p.commit_now(0, pending=True, since_commit_s=0.0)


def test_work_left_over_makes_the_next_poll_not_wait() -> None:
    p = pacing()
    p.commit_now(0, pending=True, since_commit_s=0.0)
    assert p.poll_timeout_s(work_left=True) == 0.0
    assert p.poll_timeout_s(work_left=False) == POLL_S


def test_aborts_give_up_once_every_transaction_has_aborted_for_max_s() -> None:
    streak = AbortStreak(60.0)
    assert not streak.aborted(1000.0)  # the first abort starts the streak
    assert not streak.aborted(1059.9)
    assert streak.aborted(1060.0)


def test_a_commit_ends_the_streak() -> None:
    streak = AbortStreak(60.0)
    assert not streak.aborted(1000.0)
    streak.committed()
    assert not streak.aborted(1059.0)  # a new streak, from 1059
    assert not streak.aborted(1118.0)
    assert streak.aborted(1119.0)
