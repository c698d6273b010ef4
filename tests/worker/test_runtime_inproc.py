"""The worker runtime's logic in process, over the fakes of its ports: no broker, no waits.

A few of the same behaviours run against the real broker in ``test_runtime.py``.
"""

from __future__ import annotations

from typing import Any

from streams.handler import HANDLER_ERROR, SHUTDOWN, Ack, Nack, Outcome, Task
from streams.worker.backpressure import PAUSE_AFTER_MS
from tests.worker.fakes import TASKS, Worker
from tests.worker.kafka_helpers import make_task

T0 = 1_795_946_400_000  # 2026-11-29T10:00:00Z
P0 = (TASKS, 0)
P1 = (TASKS, 1)


def ack_all(task: Task) -> Outcome:
    return Ack(task.end_ms)


def task(stream_id: str = "s", n: int = 0, **kw: Any) -> Task:
    return make_task(stream_id, n, now_ms=T0, **kw)


def started(worker: Worker, *tasks: Task, partition: tuple[str, int] = P0) -> list[int]:
    """Assign ``partition``, add the tasks to it, and turn until they are taken."""
    worker.source.assign(partition)
    offsets = [worker.source.add_task(t, partition) for t in tasks]
    worker.turns(len(tasks) + 2)
    return offsets


def test_an_ack_is_sent_keyed_by_stream_and_committed_only_once_delivered() -> None:
    worker = Worker(ack_all, T0)
    (offset,) = started(worker, task("stream-a"))
    worker.executor.run_all()
    worker.turns()

    (sent,) = worker.sink.sent
    assert sent.key == b"stream-a"
    assert sent.json() == {
        "stream_id": "stream-a",
        "start_ms": T0 - 61_000,
        "end_ms": T0 - 1_000,
        "attempt": 1,
        "outcome": "ack",
        "ack_ms": T0 - 1_000,
    }
    assert worker.source.committed.get(P0, 0) == offset  # sent, not yet confirmed
    worker.sink.confirm()
    worker.turns()
    assert worker.source.committed == {P0: offset + 1}
    assert worker.count("ack") == 1


def test_commits_move_only_over_the_contiguous_prefix_of_delivered_results() -> None:
    worker = Worker(ack_all, T0, concurrency=2)
    first, second = started(worker, task(n=0), task(n=1))
    assert len(worker.executor.held) == 2
    run_first, run_second = worker.executor.held
    worker.executor.held = []

    run_second()
    worker.turns()
    worker.sink.confirm()
    worker.turns()
    assert worker.sink.values("ack")[0]["end_ms"] == T0 - 1_000 + 1  # the second task's
    assert worker.source.committed.get(P0, first) == first  # offset 0 still unfinished

    run_first()
    worker.work()
    assert worker.source.committed == {P0: second + 1}


def test_a_failed_delivery_is_sent_again_and_only_then_committed() -> None:
    worker = Worker(ack_all, T0)
    (offset,) = started(worker, task())
    worker.executor.run_all()
    worker.turns()
    worker.sink.fail()
    worker.turns()
    assert len(worker.sink.sent) == 2  # sent again
    assert worker.source.committed.get(P0, 0) == offset
    worker.sink.confirm()
    worker.turns()
    assert worker.source.committed == {P0: offset + 1}


def test_expired_and_undecodable_tasks_are_skipped_counted_and_committed() -> None:
    worker = Worker(ack_all, T0)
    worker.source.assign(P0)
    worker.source.add_task(task(timeout_ms=-1))  # its deadline has passed
    worker.source.append(P0, b"not json")
    worker.source.append(P0, None)
    worker.turns(5)

    assert worker.executor.held == [] and worker.sink.sent == []
    assert worker.source.committed == {P0: 3}
    assert (worker.count("expired"), worker.count("invalid")) == (1, 2)


def test_an_early_task_waits_for_its_end_ms_then_runs() -> None:
    worker = Worker(ack_all, T0)
    started(worker, task(end_in_ms=5_000))
    assert worker.executor.held == []

    worker.now_ms = T0 + 4_999
    worker.turns()
    assert worker.executor.held == []
    worker.now_ms = T0 + 5_000
    worker.work()
    assert [v["end_ms"] for v in worker.sink.values("ack")] == [T0 + 5_000]


def test_a_task_that_expires_while_it_waits_is_skipped() -> None:
    worker = Worker(ack_all, T0)
    started(worker, task(end_in_ms=5_000, timeout_ms=3_000))
    worker.now_ms = T0 + 3_000
    worker.turns()
    assert worker.executor.held == [] and worker.count("expired") == 1
    assert worker.source.committed == {P0: 1}


def test_a_running_task_heartbeats_every_third_of_its_timeout() -> None:
    worker = Worker(ack_all, T0)
    started(worker, task(timeout_ms=30_000))
    assert worker.sink.values("heartbeat") == []

    worker.now_ms = T0 + 10_000
    worker.turns()
    worker.now_ms = T0 + 19_999
    worker.turns()
    assert len(worker.sink.values("heartbeat")) == 1
    worker.now_ms = T0 + 20_000
    worker.turns()
    assert len(worker.sink.values("heartbeat")) == 2
    worker.executor.run_all()
    worker.turns()
    worker.now_ms = T0 + 30_000
    worker.turns()
    assert len(worker.sink.values("heartbeat")) == 2  # none once it is answered


def test_heartbeats_keep_their_pace_when_the_wall_clock_steps_back_or_forward() -> None:
    worker = Worker(ack_all, T0)
    worker.mono_ms = 1_000
    started(worker, task(timeout_ms=30_000))
    worker.now_ms, worker.mono_ms = T0 - 3_600_000, 11_000  # an hour back, 10 s later
    worker.turns()
    assert len(worker.sink.values("heartbeat")) == 1
    worker.now_ms, worker.mono_ms = T0 - 3_590_000, 21_000
    worker.turns()
    assert len(worker.sink.values("heartbeat")) == 2
    worker.now_ms, worker.mono_ms = T0 + 3_600_000, 22_000  # two hours forward, 1 s later
    worker.turns()
    assert len(worker.sink.values("heartbeat")) == 2  # no burst: the next is due at 31 s
    worker.mono_ms = 31_000
    worker.turns()
    assert len(worker.sink.values("heartbeat")) == 3


def test_a_handler_that_raises_or_answers_badly_is_nacked_handler_error() -> None:
    def handler(task: Task) -> Outcome:
        if task.params.get("raise"):
            raise RuntimeError("boom")
        return Ack(task.start_ms)  # outside (start_ms, end_ms]

    worker = Worker(handler, T0, concurrency=2)
    started(worker, task(n=0, params={"raise": True}), task(n=1))
    worker.work()

    errors = [v["error"] for v in worker.sink.values("nack")]
    assert [e["kind"] for e in errors] == [HANDLER_ERROR, HANDLER_ERROR]
    assert "RuntimeError: boom" in errors[0]["message"]
    assert "outside the window" in errors[1]["message"]
    assert worker.source.committed == {P0: 2}


def test_a_handlers_own_shutdown_nack_is_sent_as_a_handler_error() -> None:
    """Issue 25, defect 11: the core requeues a `shutdown` nack at once without spending the
    retry budget (a stopping worker did not try the task), so a handler that returned it had its
    window retried forever: 361 attempts in an hour, never bypassed."""

    def handler(task: Task) -> Outcome:
        return Nack(SHUTDOWN, "the source asked us to stop")

    worker = Worker(handler, T0)
    started(worker, task())
    worker.work()

    (nack,) = worker.sink.values("nack")
    assert nack["error"]["kind"] == HANDLER_ERROR
    message = nack["error"]["message"]
    assert "reserved nack kind 'shutdown'" in message
    assert "the source asked us to stop" in message  # the handler's own words are kept
    assert worker.count("shutdown") == 0 and worker.count("nack") == 1
    assert worker.source.committed == {P0: 1}


def test_shutdown_nacks_what_did_not_start_and_what_outran_the_grace_then_commits() -> None:
    worker = Worker(ack_all, T0, concurrency=1)
    started(worker, task(n=0), task(n=1))
    assert len(worker.executor.held) == 1  # one running, one ready

    worker.runtime.stop()
    worker.runtime.shutdown()

    nacks = worker.sink.values("nack")
    assert [n["error"]["kind"] for n in nacks] == [SHUTDOWN, SHUTDOWN]
    assert sorted(n["end_ms"] for n in nacks) == [T0 - 1_000, T0 - 1_000 + 1]
    assert worker.source.paused and worker.source.closed and worker.executor.closed
    assert worker.source.commits[-1] == ({P0: 2}, True)  # flushed, then committed, waiting
    assert worker.count("shutdown") == 2 and not worker.runtime.failed

    worker.executor.run_all()  # the handler returns after its shutdown nack: dropped
    assert len(worker.sink.sent) == 2


def test_a_stop_with_the_broker_down_leaves_undelivered_tasks_uncommitted() -> None:
    worker = Worker(ack_all, T0)
    started(worker, task())
    worker.sink.down = True
    worker.runtime.stop()
    worker.runtime.shutdown()
    assert worker.sink.values("nack")  # the shutdown nack was sent, never confirmed
    assert worker.source.committed.get(P0, 0) == 0


def test_a_revoked_partition_commits_its_safe_position_and_drops_tasks_not_started() -> None:
    worker = Worker(ack_all, T0, concurrency=1, commit_interval_s=3600.0)  # no async commits
    started(worker, task(n=0), task(n=1), task(n=2))
    worker.executor.run_all()  # the first is acked and delivered; the second starts
    worker.turns()
    worker.sink.confirm()
    worker.turns()
    assert len(worker.executor.held) == 1
    worker.source.revoke(P0)
    worker.turns()

    assert worker.source.commits == [({P0: 1}, True)]  # past the first, and it waited
    worker.executor.run_all()  # the running task finishes after the revocation
    worker.work()
    assert len(worker.sink.values("ack")) == 2  # its result is still sent...
    assert worker.source.committed == {P0: 1}  # ...but its commit is the new owner's
    assert worker.executor.held == []  # the third never started


def test_a_lost_partition_commits_nothing() -> None:
    worker = Worker(ack_all, T0)
    started(worker, task())
    before = list(worker.source.commits)
    worker.source.lose(P0)
    worker.turns()
    worker.work()
    assert len(worker.sink.values("ack")) == 1
    assert worker.source.commits == before


def test_a_failed_async_commit_is_made_again() -> None:
    worker = Worker(ack_all, T0)
    started(worker, task())
    worker.work()
    assert worker.source.commits[-1] == ({P0: 1}, False)
    made = len(worker.source.commits)
    worker.turns()
    assert len(worker.source.commits) == made  # an unchanged position is not committed again
    worker.source.fail_async_commit(P0)
    worker.turns()
    assert worker.source.commits[made:] == [({P0: 1}, False)]


def test_a_full_buffer_stops_polling_then_pauses_fetching_once_full_for_a_while() -> None:
    worker = Worker(ack_all, T0, concurrency=1, buffer=1)
    started(worker, task(n=0), task(n=1), task(n=2))
    assert len(worker.executor.held) == 1
    assert worker.source.positions[P0] == 2  # the third task waits in the log
    assert not worker.source.paused  # not yet: a pause drops librdkafka's prefetch

    worker.now_ms += PAUSE_AFTER_MS  # still full: every partition is paused, polls go on
    worker.turns(2)
    assert worker.source.paused and worker.source.positions[P0] == 2

    worker.work(6)
    assert not worker.source.paused
    assert len(worker.sink.values("ack")) == 3


def test_a_buffer_that_drains_in_time_takes_the_next_task_without_a_pause() -> None:
    worker = Worker(ack_all, T0, concurrency=1, buffer=1)
    started(worker, task(n=0), task(n=1), task(n=2))
    worker.work(8)
    assert len(worker.sink.values("ack")) == 3
    assert worker.source.pauses == 0 and worker.source.positions[P0] == 3


def test_a_fatal_client_error_stops_the_worker_as_failed() -> None:
    worker = Worker(ack_all, T0)
    worker.runtime.fatal("the producer was fenced")
    assert worker.runtime.stopping and worker.runtime.failed


def test_tasks_of_two_partitions_commit_separately() -> None:
    worker = Worker(lambda t: Nack("no_data", "nothing") if t.params else Ack(t.end_ms), T0)
    worker.source.assign(P0, P1)
    worker.source.add_task(task(n=0), P0)
    worker.source.add_task(task(n=1, params={"x": 1}), P1)
    worker.work(6)
    assert worker.source.committed == {P0: 1, P1: 1}
    assert sorted(v["outcome"] for v in worker.sink.values()) == ["ack", "nack"]


def test_while_a_handler_runs_the_loop_never_blocks_in_poll() -> None:
    # A blocking poll would hold a finished handler's result for the poll's whole timeout.
    worker = Worker(ack_all, T0)
    started(worker, task("s"))
    worker.source.poll_timeouts.clear()
    worker.turns()
    assert worker.source.poll_timeouts == [0, 0, 0]  # the handler is still running
    worker.executor.run_all()
    worker.turns(1)
    assert [s.json()["outcome"] for s in worker.sink.sent] == ["ack"]
    worker.source.poll_timeouts.clear()
    worker.turns(1)  # idle again: the poll waits for a task
    assert worker.source.poll_timeouts == [worker.config.poll_interval_s]


def test_a_worker_says_its_pipeline_in_every_result_unless_it_serves_the_default() -> None:
    """The coordinator rejects a result of a worker of another pipeline (streams.core)."""
    worker = Worker(ack_all, T0, route="logs")
    started(worker, task("stream-a"))
    worker.executor.run_all()
    worker.turns()
    assert [sent.json()["pipeline"] for sent in worker.sink.sent] == ["logs"]
    plain = Worker(ack_all, T0)
    started(plain, task("stream-a"))
    plain.executor.run_all()
    plain.turns()
    assert ["pipeline" in sent.json() for sent in plain.sink.sent] == [False]
