"""The worker's schedule: early tasks wait, expired ones are skipped, heartbeats a third apart."""

from __future__ import annotations

from typing import Any

from streams.worker.api import Task
from streams.worker.jobs import LONG_RUN_MS, JobBoard, heartbeat_interval_ms
from streams.worker.offsets import OffsetToken

NOW = 1_800_000_000_000


def task(n: int, *, end_ms: int = NOW, timeout_ms: int = 30_000, **fields: Any) -> Task:
    values: dict[str, Any] = {
        "task_id": f"t{n}",
        "stream_id": "s",
        "start_ms": end_ms - 60_000,
        "end_ms": end_ms,
        "step_ms": 15_000,
        "attempt": 1,
        "dispatched_ms": NOW,
        "deadline_ms": NOW + timeout_ms,
        "params": {},
        **fields,
    }
    return Task(**values)


def token(offset: int, partition: int = 0) -> OffsetToken:
    return OffsetToken(("tasks", partition), offset, 1)


def test_tasks_start_in_arrival_order_up_to_the_concurrency() -> None:
    board = JobBoard(concurrency=2)
    jobs = [board.admit(task(i), token(i), NOW) for i in range(3)]

    started, expired = board.start_due(NOW)

    assert started == jobs[:2] and expired == []
    assert [j.state for j in jobs] == ["running", "running", "ready"]
    assert len(board) == 3
    assert board.start_due(NOW) == ([], [])


def test_a_returned_handler_frees_its_thread_for_the_next_task() -> None:
    board = JobBoard(concurrency=1)
    first = board.admit(task(1), token(1), NOW)
    second = board.admit(task(2), token(2), NOW)
    assert first and second
    board.start_due(NOW)

    assert board.returned(first) is True
    board.answered(first, b"ack")
    assert board.start_due(NOW)[0] == [second]

    board.delivered(first)
    assert len(board) == 1


def test_a_task_expired_on_arrival_is_not_admitted() -> None:
    board = JobBoard(concurrency=1)

    assert board.admit(task(1, timeout_ms=0), token(1), NOW) is None
    assert len(board) == 0


def test_a_task_that_expires_while_waiting_for_a_thread_is_skipped() -> None:
    board = JobBoard(concurrency=1)
    board.admit(task(1), token(1), NOW)
    late = board.admit(task(2, timeout_ms=1_000), token(2), NOW)
    board.start_due(NOW)

    started, expired = board.start_due(NOW + 1_000)

    assert started == [] and expired == [late]
    assert len(board) == 1


def test_an_early_task_waits_for_its_end_ms_while_later_ones_start() -> None:
    board = JobBoard(concurrency=2)
    early = board.admit(task(1, end_ms=NOW + 500), token(1), NOW)
    on_time = board.admit(task(2), token(2), NOW)
    assert early is not None and early.state == "waiting"

    assert board.start_due(NOW) == ([on_time], [])
    assert board.start_due(NOW + 499) == ([], [])
    assert board.start_due(NOW + 500) == ([early], [])


def test_heartbeats_come_every_third_of_the_timeout_from_dispatch() -> None:
    board = JobBoard(concurrency=1)
    job = board.admit(task(1, timeout_ms=900), token(1), NOW)
    board.start_due(NOW)

    assert heartbeat_interval_ms(task(1, timeout_ms=900)) == 300
    assert board.heartbeats_due(NOW + 299) == []
    assert board.heartbeats_due(NOW + 300) == [job]
    assert board.heartbeats_due(NOW + 599) == []
    assert board.heartbeats_due(NOW + 600) == [job]


def test_heartbeats_and_max_run_follow_the_monotonic_clock_not_the_wall_clock() -> None:
    board = JobBoard(concurrency=1, max_run_ms=1_000)
    job = board.admit(task(1, timeout_ms=900), token(1), NOW)
    board.start_due(NOW + 100, mono_ms=5_000)  # the first heartbeat is 200 ms away

    assert board.heartbeats_due(5_199) == []
    assert board.heartbeats_due(5_200) == [job]
    assert board.heartbeats_due(5_500) == [job]
    assert board.heartbeats_due(6_000) == []  # ran 1 s on the monotonic clock: no more


def test_a_task_started_late_heartbeats_at_once() -> None:
    board = JobBoard(concurrency=1)
    job = board.admit(task(1, timeout_ms=900), token(1), NOW)
    board.start_due(NOW + 400)  # a third of the timeout passed while it waited

    assert board.heartbeats_due(NOW + 400) == [job]


def test_heartbeat_intervals_have_a_floor_and_need_a_timeout() -> None:
    assert heartbeat_interval_ms(task(1, timeout_ms=30)) == 100
    assert heartbeat_interval_ms(task(1, timeout_ms=0)) is None


def test_an_answered_job_no_longer_heartbeats_and_its_late_return_is_unwanted() -> None:
    board = JobBoard(concurrency=1)
    job = board.admit(task(1, timeout_ms=900), token(1), NOW)
    assert job is not None
    board.start_due(NOW)

    board.answered(job, b"nack shutdown")

    assert board.heartbeats_due(NOW + 10_000) == []
    assert board.running() == []
    assert board.returned(job) is False


def test_revoking_a_partition_drops_its_unstarted_jobs_only() -> None:
    board = JobBoard(concurrency=1)
    running = board.admit(task(1), token(1, partition=0), NOW)
    board.start_due(NOW)
    ready = board.admit(task(2), token(2, partition=0), NOW)
    waiting = board.admit(task(3, end_ms=NOW + 1), token(3, partition=0), NOW)
    other = board.admit(task(4), token(4, partition=1), NOW)

    dropped = board.drop_unstarted([("tasks", 0)])

    assert set(dropped) == {ready, waiting}
    assert board.running() == [running]
    assert board.unstarted() == [other]
    assert board.start_due(NOW + 1) == ([], [])  # the dropped ones never start


def test_an_early_task_whose_deadline_comes_first_expires_while_it_waits() -> None:
    board = JobBoard(concurrency=1)
    job = board.admit(task(1, end_ms=NOW + 5_000, timeout_ms=1_000), token(1), NOW)

    assert board.start_due(NOW + 1_000) == ([], [job])
    assert len(board) == 0
    assert board.start_due(NOW + 5_000) == ([], [])


def test_jobs_that_leave_unstarted_do_not_pile_up_behind_a_stuck_handler() -> None:
    """With every thread stuck in a handler, tasks keep arriving and expiring (or being
    revoked) before they start: each leaves the board, so backpressure lets the next one in,
    but the ready queue and the waiting heap kept every one of them."""
    board = JobBoard(concurrency=1)
    stuck = board.admit(task(0, timeout_ms=10**9), token(0), NOW)
    assert stuck and board.start_due(NOW)[0] == [stuck]

    for n in range(1, 1_001):
        now = NOW + 10 * n
        ready = board.admit(task(n, dispatched_ms=now, deadline_ms=now + 5), token(n), now)
        early = board.admit(task(n, end_ms=now + 10**9), token(n, partition=1), now)
        assert ready and early
        board.drop_unstarted([("tasks", 1)])
        assert board.start_due(now + 5) == ([], [ready])
        assert len(board) == 1

    kept = len(board._ready) + len(board._waiting)
    assert kept <= 2, f"{kept} jobs that left the board are still queued"


def test_a_job_running_past_max_run_gets_no_more_heartbeats() -> None:
    board = JobBoard(concurrency=1, max_run_ms=10_000)
    job = board.admit(task(1, timeout_ms=3_000), token(1), NOW)
    started, _ = board.start_due(NOW)
    assert started == [job]
    beats = [t for t in range(NOW, NOW + 20_000, 100) if board.heartbeats_due(t)]
    # One a second (a third of the 3 s timeout) while it has run less than 10 s, then none.
    assert beats and max(beats) < NOW + 10_000 and len(beats) >= 8
    assert job.next_heartbeat_mono_ms is None


def test_a_job_is_said_to_run_long_once_it_has_run_long_run_ms() -> None:
    board = JobBoard(concurrency=2)
    quick = board.admit(task(1), token(1), NOW)
    slow = board.admit(task(2), token(2), NOW)
    assert quick and slow
    board.start_due(NOW)
    board.returned(quick)
    board.answered(quick, b"ack")

    assert board.long_running(NOW + LONG_RUN_MS - 1) == []
    assert board.long_running(NOW + LONG_RUN_MS) == [slow]  # the quick one finished
    assert board.long_running(NOW + 10 * LONG_RUN_MS) == []  # said once


def test_finished_jobs_do_not_pile_up_in_the_heartbeat_and_deadline_queues() -> None:
    """Each turn asks what is due rather than scanning every job, so the queues keep entries of
    jobs that finished: they must be dropped, or a busy worker's queues grow without end."""
    board = JobBoard(concurrency=4)
    for n in range(10_000):
        job = board.admit(task(n, timeout_ms=3_600_000), token(n), NOW)
        assert job and board.start_due(NOW)[0] == [job]
        board.returned(job)
        board.answered(job, b"ack")
        board.delivered(job)

    assert len(board._beats) <= 64 and len(board._deadlines) <= 66
    assert len(board._starts) == 10_000 and board.long_running(NOW + LONG_RUN_MS) == []
    assert not board._starts
