"""Announcing commits: the Faust engine's outbox under failed deliveries, and the transactional
engine's one commit per stream per transaction."""

from __future__ import annotations

import json
from typing import Any

from streams.coordinator.announcer import FLUSH_MAX_WINDOWS
from tests.support.commits import check_chain

from .fakes import T0, Driver, Sent, ack, at, nack

SID = "cluster-a"


def in_flight(count: int, **driver: Any) -> tuple[Driver, list[dict[str, Any]]]:
    """cluster-a created at 10:05 with `count` windows of 1 min in flight from 10:00."""
    d = Driver(**driver)
    d.assign(SID)
    d.tick(at(10, 5))  # the partition is built: only a failure can have it announced again
    d.upsert(SID, at(10, 5), max_in_flight=count)
    tasks = d.tasks()
    assert len(tasks) == count
    d.emitter.clear()
    return d, tasks


def spans(commits: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(c["previous_ms"], c["downstream_ms"]) for c in commits]


def covered(commits: list[dict[str, Any]]) -> set[int]:
    return {w["end_ms"] for c in commits for w in c["windows"]}


# -- at-least-once: a failed delivery is never erased -------------------------------------------


def test_a_failed_commit_is_announced_again_although_a_later_one_was_delivered() -> None:
    d, (first, second, _) = in_flight(3, flush_ms=0)
    d.result(ack(first), at(10, 5, 1))
    d.result(ack(second), at(10, 5, 2))
    assert spans(d.commits()) == [(T0, at(10, 1)), (at(10, 1), at(10, 2))]

    def delivered(sent: Sent) -> bool:  # the first commit is given up, the second arrives
        return sent.json()["downstream_ms"] != at(10, 1)

    d.emitter.settle(delivered)
    d.emitter.clear()
    d.tick(at(10, 5, 3))  # the failure had the stream woken for a re-announcement

    assert spans(d.commits()) == [(T0, at(10, 2))]  # the whole outbox, from the hole on
    assert d.processor.stats["reannounced"] == 1


def test_a_later_confirmation_does_not_erase_a_failed_commit_across_a_restart() -> None:
    d, (first, second, third) = in_flight(3, flush_ms=0)
    d.result(ack(first), at(10, 5, 1))
    d.result(ack(second), at(10, 5, 2))
    d.emitter.settle(lambda sent: sent.json()["downstream_ms"] != at(10, 1))
    d.result(ack(third), at(10, 5, 3))  # saves the stream with the confirmation it got

    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 5, 4))
    assert at(10, 1) in covered(again.commits())  # (10:00, 10:01] was never delivered
    assert spans(again.commits()) == [(T0, at(10, 3))]


def test_bypass_records_whose_delivery_failed_are_sent_again() -> None:
    d, (task,) = in_flight(1, flush_ms=0)
    d.upsert(SID, at(10, 5), max_attempts=1)
    d.result(nack(task), at(10, 5, 1))
    (bypassed,) = d.bypassed()
    d.emitter.fail_all()
    d.emitter.clear()

    d.tick(at(10, 5, 2))
    assert [(s.key, s.json()) for s in d.bypassed()] == [(bypassed.key, bypassed.json())]


def test_delivered_commits_leave_the_outbox_only_as_a_contiguous_run() -> None:
    d, tasks = in_flight(3, flush_ms=0)
    for i, task in enumerate(tasks):
        d.result(ack(task), at(10, 5, 1 + i))
    d.emitter.deliver_all()
    d.tick(at(10, 6))  # an accepted event saves the confirmations

    again = d.restart()
    again.assign(SID)
    again.tick(at(10, 6, 1))
    assert again.commits() == []


# -- at-least-once: nothing of a stream overtakes its failed commit ------------------------------
#
# Found reviewing the replay lane (issue 25): a failed delivery had the outbox announced again at
# the stream's next tick, but an ack (or a replay ack) handled before that tick sent its commit
# first, and a consumer of `commits` read (10:02, 10:03] while its mark was still 10:01 (or a
# `replayed` commit at 10:02); one that keeps its mark from `downstream_ms` skips the failed
# span. What a consumer reads is what the producer delivered, in the order it was sent (the
# idempotent producer keeps a partition's order).


class Consumer:
    """What a consumer of `commits` reads: the sends the producer delivered, in send order."""

    def __init__(self, d: Driver) -> None:
        self.d = d
        self.delivered: set[int] = set()

    def settle(self, fail: bool = False) -> None:
        """The producer confirms every pending send (`fail`: gives every one up)."""

        def outcome(sent: Sent) -> bool:
            if not fail:
                self.delivered.add(id(sent))
            return not fail

        self.d.emitter.settle(outcome)

    def commits(self) -> list[dict[str, Any]]:
        return [
            s.json()
            for s in self.d.emitter.on(self.d.topics.commits)
            if id(s) in self.delivered or (s.on_delivered is None and s.on_failed is None)
        ]


def test_an_ack_before_the_resend_tick_goes_out_after_the_failed_commit() -> None:
    d = Driver(flush_ms=0)
    d.assign(SID)
    d.tick(at(10, 5))  # the partition is built: only a failure has the stream announced again
    d.upsert(SID, at(10, 5), max_in_flight=3)
    first, second, third = d.tasks()
    reader = Consumer(d)
    d.result(ack(first), at(10, 5, 1))
    reader.settle()  # (10:00, 10:01] delivered
    d.result(ack(second), at(10, 5, 2))
    reader.settle(fail=True)  # (10:01, 10:02] given up: announced again at the next tick...
    d.result(ack(third), at(10, 5, 3))  # ...but an ack comes first
    reader.settle()
    d.tick(at(10, 5, 4))
    reader.settle()

    commits = reader.commits()
    check_chain(commits, exact=False)  # a repeat is allowed, a gap is not
    # The failed span went out again at the ack, ahead of the ack's own commit.
    assert spans(commits) == [(T0, at(10, 1)), (at(10, 1), at(10, 2)), (at(10, 2), at(10, 3))]


def test_a_replay_ack_before_the_resend_tick_goes_out_after_the_failed_commit() -> None:
    """The replayed commit is announced at the stream's last announced mark: it must not reach
    a consumer before the live commit that moved the mark there."""
    d = Driver(flush_ms=0)
    d.upsert(SID, at(10, 0, 30), non_retryable=["bad_params"])
    d.assign(SID)
    d.tick(at(10, 1))
    reader = Consumer(d)
    (task,) = d.tasks()
    d.result(nack(task, "bad_params"), at(10, 1, 5))  # (10:00, 10:01] bypassed
    reader.settle()
    d.control({"type": "replay", "stream_id": SID, "from_ms": T0, "to_ms": at(10, 1)}, at(10, 2))
    d.tick(at(10, 2))
    (live,) = [t for t in d.tasks() if t["start_ms"] == at(10, 1)]
    (replay,) = [t for t in d.tasks() if t.get("replay")]
    reader.settle()
    d.result(ack(live), at(10, 2, 1))
    reader.settle(fail=True)  # (10:01, 10:02] given up
    d.result(ack(replay), at(10, 2, 2))  # replayed at the mark 10:02, before the tick
    reader.settle()
    d.tick(at(10, 2, 3))
    reader.settle()

    commits = reader.commits()
    check_chain(commits, exact=False)
    assert [(c["previous_ms"], c["downstream_ms"], c["windows"][0]["reason"]) for c in commits] == [
        (T0, at(10, 1), "bypass"),
        (at(10, 1), at(10, 2), "ack"),  # announced again at the replay ack, ahead of its commit
        (at(10, 2), at(10, 2), "replayed"),
    ]


# -- transactional: one commit per stream per transaction ---------------------------------------


def test_transactional_commits_wait_for_the_checkpoint_and_list_every_window_in_order() -> None:
    d, tasks = in_flight(3, transactional=True, checkpoint_each=False)
    d.checkpoint(at(10, 5))
    for i, task in enumerate(tasks):
        d.result(ack(task), at(10, 5, 1 + i))
    assert d.commits() == []

    d.checkpoint(at(10, 5, 9))
    (commit,) = d.commits()
    assert (commit["previous_ms"], commit["downstream_ms"]) == (T0, at(10, 3))
    assert [w["end_ms"] for w in commit["windows"]] == [at(10, 1), at(10, 2), at(10, 3)]
    assert commit["committed_ms"] == at(10, 5, 9)
    d.checkpoint(at(10, 5, 10))
    assert len(d.commits()) == 1  # nothing new: nothing more


def test_transactional_mode_passes_no_delivery_callbacks_and_keeps_no_outbox() -> None:
    d, (task,) = in_flight(1, transactional=True)
    d.upsert(SID, at(10, 5), max_attempts=1)
    d.result(nack(task), at(10, 5, 1))
    assert len(d.bypassed()) == 1 and len(d.commits()) == 1
    assert d.emitter.callbacks_passed() == 0
    # No outbox, no pending bypass: the state, its bypass count and when it last committed.
    assert set(json.loads(d.store.data[SID])) == {"s", "x", "n", "c"}


def test_a_full_batch_is_flushed_before_the_checkpoint() -> None:
    d = Driver(transactional=True, checkpoint_each=False)
    d.assign(SID)
    count = FLUSH_MAX_WINDOWS + 1
    d.upsert(SID, at(10, 5), window_ms=1000, step_ms=1000, max_in_flight=count)
    tasks = d.tasks()
    for i, task in enumerate(tasks):
        d.result(ack(task), at(10, 5, 1) + i)
    (early,) = d.commits()  # at the 256th window, without waiting for the checkpoint
    assert len(early["windows"]) == FLUSH_MAX_WINDOWS
    d.checkpoint(at(10, 6))
    assert spans(d.commits())[1] == (early["downstream_ms"], T0 + count * 1000)


# -- at-least-once: the wall clock stepping back ------------------------------------------------


def test_a_backward_step_of_the_wall_clock_never_withholds_a_commit() -> None:
    d, (first, second, third) = in_flight(3, flush_ms=200)
    d.result(ack(first), at(10, 5, 10))  # the first commit after a quiet interval: at once
    d.result(ack(second), at(10, 5, 10, 100))  # within the interval: coalesced, waits
    assert spans(d.commits()) == [(T0, at(10, 1))]

    d.result(ack(third), at(10, 4))  # the clock stepped back a minute: not "too soon"
    assert spans(d.commits()) == [(T0, at(10, 1)), (at(10, 1), at(10, 3))]
