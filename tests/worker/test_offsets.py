"""The offset tracker: commits advance over the contiguous prefix of finished offsets only."""

from __future__ import annotations

import random

import pytest

from streams.worker.offsets import OffsetToken, OffsetTracker

P0 = ("tasks", 0)
P1 = ("tasks", 1)


def started(tracker: OffsetTracker, partition: tuple[str, int], *offsets: int) -> list:
    tokens = [tracker.start(partition, offset) for offset in offsets]
    assert all(tokens)
    return tokens


def test_nothing_is_committable_before_anything_is_fetched() -> None:
    tracker = OffsetTracker()
    tracker.assign(P0)

    assert tracker.committable() == {}
    assert tracker.revoke(P0) is None


def test_a_running_offset_holds_the_position_at_itself() -> None:
    tracker = OffsetTracker()
    tracker.assign(P0)
    started(tracker, P0, 10)

    assert tracker.committable() == {P0: 10}


def test_finishing_out_of_order_commits_only_the_contiguous_prefix() -> None:
    tracker = OffsetTracker()
    tracker.assign(P0)
    t10, t11, t12, t13 = started(tracker, P0, 10, 11, 12, 13)

    tracker.finish(t12)
    tracker.finish(t13)
    assert tracker.committable() == {P0: 10}

    tracker.finish(t10)
    assert tracker.committable() == {P0: 11}

    tracker.finish(t11)
    assert tracker.committable() == {P0: 14}
    assert tracker.unfinished(P0) == 0


def test_gaps_between_fetched_offsets_do_not_block_the_position() -> None:
    tracker = OffsetTracker()
    tracker.assign(P0)
    t5, t9 = started(tracker, P0, 5, 9)  # 6..8: transaction markers, never fetched

    tracker.finish(t5)
    assert tracker.committable() == {P0: 9}
    tracker.finish(t9)
    assert tracker.committable() == {P0: 10}


def test_committed_positions_are_offered_once_until_they_move() -> None:
    tracker = OffsetTracker()
    tracker.assign(P0)
    tracker.assign(P1)
    (t0,) = started(tracker, P0, 0)
    (u0,) = started(tracker, P1, 0)
    tracker.finish(t0)

    positions = tracker.committable()
    assert positions == {P0: 1, P1: 0}
    tracker.mark_committed(positions)
    assert tracker.committable() == {}

    tracker.finish(u0)
    assert tracker.committable() == {P1: 1}


def test_a_failed_commit_is_offered_again() -> None:
    tracker = OffsetTracker()
    tracker.assign(P0)
    tracker.finish(*started(tracker, P0, 0))
    tracker.mark_committed(tracker.committable())

    tracker.commit_failed([P0])

    assert tracker.committable() == {P0: 1}


def test_revoke_returns_the_safe_position_and_later_finishes_are_ignored() -> None:
    tracker = OffsetTracker()
    tracker.assign(P0)
    t0, t1 = started(tracker, P0, 0, 1)
    tracker.finish(t1)

    assert tracker.revoke(P0) == 0
    assert tracker.finish(t0) is False
    assert tracker.committable() == {}
    assert tracker.assigned() == []


def test_revoke_returns_nothing_when_the_position_was_already_committed() -> None:
    tracker = OffsetTracker()
    tracker.assign(P0)
    tracker.finish(*started(tracker, P0, 0))
    tracker.mark_committed(tracker.committable())

    assert tracker.revoke(P0) is None


def test_a_token_from_an_earlier_assignment_cannot_finish_the_new_one() -> None:
    tracker = OffsetTracker()
    tracker.assign(P0)
    (old,) = started(tracker, P0, 7)
    tracker.revoke(P0)
    tracker.assign(P0)
    (new,) = started(tracker, P0, 7)  # fetched again from the committed offset

    assert tracker.finish(old) is False
    assert tracker.committable() == {P0: 7}
    assert tracker.finish(new) is True
    assert tracker.committable() == {P0: 8}


def test_offsets_of_unassigned_partitions_or_already_seen_are_refused() -> None:
    tracker = OffsetTracker()
    assert tracker.start(P0, 0) is None

    tracker.assign(P0)
    (t3,) = started(tracker, P0, 3)
    assert tracker.start(P0, 3) is None
    assert tracker.start(P0, 2) is None
    assert tracker.start(P0, -1001) is None  # a logical offset, never a real message
    assert tracker.committable() == {P0: 3}
    tracker.finish(t3)
    assert tracker.committable() == {P0: 4}


def test_finishing_twice_is_a_bug_and_says_so() -> None:
    tracker = OffsetTracker()
    tracker.assign(P0)
    (t0,) = started(tracker, P0, 0)
    tracker.finish(t0)

    with pytest.raises(ValueError, match="not unfinished"):
        tracker.finish(t0)
    with pytest.raises(ValueError):
        tracker.finish(OffsetToken(P0, 99, t0.generation))


@pytest.mark.parametrize("seed", range(20))
def test_the_position_never_passes_an_unfinished_offset(seed: int) -> None:
    """Random fetch and finish orders: the position is always the lowest unfinished offset."""
    rng = random.Random(seed)
    tracker = OffsetTracker()
    tracker.assign(P0)
    offset = rng.randrange(100)
    running: list[OffsetToken] = []
    seen: list[int] = []
    committed: int | None = None
    for _ in range(200):
        if running and rng.random() < 0.5:
            token = running.pop(rng.randrange(len(running)))
            tracker.finish(token)
        else:
            offset += rng.choice((1, 1, 1, 2, 5))
            token = tracker.start(P0, offset)
            assert token is not None
            running.append(token)
            seen.append(offset)
        unfinished = [t.offset for t in running]
        expected = min(unfinished) if unfinished else seen[-1] + 1
        positions = tracker.committable()
        # Only a moved position is offered; an unchanged one was committed already.
        assert positions.get(P0, committed) == expected
        assert list(positions) in ([], [P0])
        tracker.mark_committed(positions)
        committed = expected
        assert tracker.unfinished(P0) == len(running)


def test_offsets_finished_behind_a_stuck_one_are_not_kept() -> None:
    """A handler stuck on the lowest offset holds the commit there, by design; but every
    later offset that finished meanwhile stayed in the heap, which grew without bound."""
    tracker = OffsetTracker()
    tracker.assign(P0)
    started(tracker, P0, 0)

    for offset in range(1, 10_001):
        (token,) = started(tracker, P0, offset)
        assert tracker.finish(token)
        assert tracker.committable() == {P0: 0}

    kept = len(tracker._partitions[P0].heap)
    assert kept <= 100, f"{kept} offsets kept for 1 unfinished"
