"""The worker runtime's logic in process, over the fakes of its ports: no broker, no waits.

Every behaviour runs twice (``new_worker``): with a sync handler, on the executor of threads,
and with the same handler as a coroutine (``async def``), on the coroutine executor: acks,
nacks, heartbeats, shutdown, rebalances and commits must not depend on the kind. A few of the
same behaviours run against the real broker in ``test_runtime.py``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from streams.handler import HANDLER_ERROR, SHUTDOWN, Ack, AnyHandler, Nack, Outcome, Task
from streams.testing import TASKS
from streams.testing import InProcessWorker as Worker
from streams.worker.backpressure import PAUSE_AFTER_MS
from tests.worker.kafka_helpers import make_task

T0 = 1_795_946_400_000  # 2026-11-29T10:00:00Z
P0 = (TASKS, 0)
P1 = (TASKS, 1)


NewWorker = Callable[..., Worker]


def ack_all(task: Task) -> Outcome:
    return Ack(task.end_ms)


def as_coroutine(handler: Callable[[Task], Outcome]) -> AnyHandler:
    """The same handler declared ``async def``, yielding to the loop before it answers."""

    async def coroutine_handler(task: Task) -> Outcome:
        await asyncio.sleep(0)
        return handler(task)

    return coroutine_handler


@pytest.fixture(params=["thread", "coroutine"])
def new_worker(request: pytest.FixtureRequest) -> NewWorker:
    """``new_worker(handler, **config)``: a worker over the fakes, at T0, running ``handler``
    as it is or as a coroutine; it checks that the runtime saw the kind at start."""

    def make(handler: Callable[[Task], Outcome], **config: Any) -> Worker:
        kind = request.param
        worker = Worker(handler if kind == "thread" else as_coroutine(handler), T0, **config)
        assert worker.runtime.kind == kind
        return worker

    return make


def task(stream_id: str = "s", n: int = 0, **kw: Any) -> Task:
    return make_task(stream_id, n, now_ms=T0, **kw)


def started(worker: Worker, *tasks: Task, partition: tuple[str, int] = P0) -> list[int]:
    """Assign ``partition``, add the tasks to it, and turn until they are taken."""
    worker.source.assign(partition)
    offsets = [worker.source.add_task(t, partition) for t in tasks]
    worker.turns(len(tasks) + 2)
    return offsets


def test_an_ack_is_sent_keyed_by_stream_and_committed_only_once_delivered(
    new_worker: NewWorker,
) -> None:
    worker = new_worker(ack_all)
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


def test_commits_move_only_over_the_contiguous_prefix_of_delivered_results(
    new_worker: NewWorker,
) -> None:
    worker = new_worker(ack_all, concurrency=2)
    first, second = started(worker, task(n=0), task(n=1))
    assert len(worker.executor.held) == 2
    run_first, run_second = worker.executor.held
    worker.executor.held = []

    worker.executor.run(run_second)
    worker.turns()
    worker.sink.confirm()
    worker.turns()
    assert worker.sink.values("ack")[0]["end_ms"] == T0 - 1_000 + 1  # the second task's
    assert worker.source.committed.get(P0, first) == first  # offset 0 still unfinished

    worker.executor.run(run_first)
    worker.work()
    assert worker.source.committed == {P0: second + 1}


def test_a_failed_delivery_is_sent_again_and_only_then_committed(new_worker: NewWorker) -> None:
    worker = new_worker(ack_all)
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


def test_expired_and_undecodable_tasks_are_skipped_counted_and_committed(
    new_worker: NewWorker,
) -> None:
    worker = new_worker(ack_all)
    worker.source.assign(P0)
    worker.source.add_task(task(timeout_ms=-1))  # its deadline has passed
    worker.source.append(P0, b"not json")
    worker.source.append(P0, None)
    worker.turns(5)

    assert worker.executor.held == [] and worker.sink.sent == []
    assert worker.source.committed == {P0: 3}
    assert (worker.count("expired"), worker.count("invalid")) == (1, 2)


def test_an_early_task_waits_for_its_end_ms_then_runs(new_worker: NewWorker) -> None:
    worker = new_worker(ack_all)
    started(worker, task(end_in_ms=5_000))
    assert worker.executor.held == []

    worker.now_ms = T0 + 4_999
    worker.turns()
    assert worker.executor.held == []
    worker.now_ms = T0 + 5_000
    worker.work()
    assert [v["end_ms"] for v in worker.sink.values("ack")] == [T0 + 5_000]


def test_a_task_that_expires_while_it_waits_is_skipped(new_worker: NewWorker) -> None:
    worker = new_worker(ack_all)
    started(worker, task(end_in_ms=5_000, timeout_ms=3_000))
    worker.now_ms = T0 + 3_000
    worker.turns()
    assert worker.executor.held == [] and worker.count("expired") == 1
    assert worker.source.committed == {P0: 1}


def test_a_running_task_heartbeats_every_third_of_its_timeout(new_worker: NewWorker) -> None:
    worker = new_worker(ack_all)
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


def test_heartbeats_keep_their_pace_when_the_wall_clock_steps_back_or_forward(
    new_worker: NewWorker,
) -> None:
    worker = new_worker(ack_all)
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


def test_a_handler_that_raises_or_answers_badly_is_nacked_handler_error(
    new_worker: NewWorker,
) -> None:
    def handler(task: Task) -> Outcome:
        if task.params.get("raise"):
            raise RuntimeError("boom")
        return Ack(task.start_ms)  # outside (start_ms, end_ms]

    worker = new_worker(handler, concurrency=2)
    started(worker, task(n=0, params={"raise": True}), task(n=1))
    worker.work()

    errors = [v["error"] for v in worker.sink.values("nack")]
    assert [e["kind"] for e in errors] == [HANDLER_ERROR, HANDLER_ERROR]
    assert "RuntimeError: boom" in errors[0]["message"]
    assert "outside the window" in errors[1]["message"]
    assert worker.source.committed == {P0: 2}


def test_a_handlers_own_shutdown_nack_is_sent_as_a_handler_error(new_worker: NewWorker) -> None:
    """Issue 25, defect 11: the core requeues a `shutdown` nack at once without spending the
    retry budget (a stopping worker did not try the task), so a handler that returned it had its
    window retried forever: 361 attempts in an hour, never bypassed."""

    def handler(task: Task) -> Outcome:
        return Nack(SHUTDOWN, "the source asked us to stop")

    worker = new_worker(handler)
    started(worker, task())
    worker.work()

    (nack,) = worker.sink.values("nack")
    assert nack["error"]["kind"] == HANDLER_ERROR
    message = nack["error"]["message"]
    assert "reserved nack kind 'shutdown'" in message
    assert "the source asked us to stop" in message  # the handler's own words are kept
    assert worker.count("shutdown") == 0 and worker.count("nack") == 1
    assert worker.source.committed == {P0: 1}


def test_shutdown_nacks_what_did_not_start_and_what_outran_the_grace_then_commits(
    new_worker: NewWorker,
) -> None:
    worker = new_worker(ack_all, concurrency=1)
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


def test_a_stop_with_the_broker_down_leaves_undelivered_tasks_uncommitted(
    new_worker: NewWorker,
) -> None:
    worker = new_worker(ack_all)
    started(worker, task())
    worker.sink.down = True
    worker.runtime.stop()
    worker.runtime.shutdown()
    assert worker.sink.values("nack")  # the shutdown nack was sent, never confirmed
    assert worker.source.committed.get(P0, 0) == 0


def test_a_revoked_partition_commits_its_safe_position_and_drops_tasks_not_started(
    new_worker: NewWorker,
) -> None:
    worker = new_worker(ack_all, concurrency=1, commit_interval_s=3600.0)  # no async commits
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


def test_a_lost_partition_commits_nothing(new_worker: NewWorker) -> None:
    worker = new_worker(ack_all)
    started(worker, task())
    before = list(worker.source.commits)
    worker.source.lose(P0)
    worker.turns()
    worker.work()
    assert len(worker.sink.values("ack")) == 1
    assert worker.source.commits == before


def test_a_failed_async_commit_is_made_again(new_worker: NewWorker) -> None:
    worker = new_worker(ack_all)
    started(worker, task())
    worker.work()
    assert worker.source.commits[-1] == ({P0: 1}, False)
    made = len(worker.source.commits)
    worker.turns()
    assert len(worker.source.commits) == made  # an unchanged position is not committed again
    worker.source.fail_async_commit(P0)
    worker.turns()
    assert worker.source.commits[made:] == [({P0: 1}, False)]


def test_a_full_buffer_stops_polling_then_pauses_fetching_once_full_for_a_while(
    new_worker: NewWorker,
) -> None:
    worker = new_worker(ack_all, concurrency=1, buffer=1)
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


def test_a_buffer_that_drains_in_time_takes_the_next_task_without_a_pause(
    new_worker: NewWorker,
) -> None:
    worker = new_worker(ack_all, concurrency=1, buffer=1)
    started(worker, task(n=0), task(n=1), task(n=2))
    worker.work(8)
    assert len(worker.sink.values("ack")) == 3
    assert worker.source.pauses == 0 and worker.source.positions[P0] == 3


def test_a_fatal_client_error_stops_the_worker_as_failed(new_worker: NewWorker) -> None:
    worker = new_worker(ack_all)
    worker.runtime.fatal("the producer was fenced")
    assert worker.runtime.stopping and worker.runtime.failed


def test_tasks_of_two_partitions_commit_separately(new_worker: NewWorker) -> None:
    worker = new_worker(lambda t: Nack("no_data", "nothing") if t.params else Ack(t.end_ms))
    worker.source.assign(P0, P1)
    worker.source.add_task(task(n=0), P0)
    worker.source.add_task(task(n=1, params={"x": 1}), P1)
    worker.work(6)
    assert worker.source.committed == {P0: 1, P1: 1}
    assert sorted(v["outcome"] for v in worker.sink.values()) == ["ack", "nack"]


def test_while_a_handler_runs_the_loop_never_blocks_in_poll(new_worker: NewWorker) -> None:
    # A blocking poll would hold a finished handler's result for the poll's whole timeout.
    worker = new_worker(ack_all)
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


def test_a_handler_running_past_max_task_s_sends_no_more_heartbeats(
    new_worker: NewWorker,
) -> None:
    worker = new_worker(ack_all, max_task_s=15.0)
    started(worker, task(timeout_ms=30_000))
    worker.now_ms = T0 + 10_000
    worker.turns()
    assert len(worker.sink.values("heartbeat")) == 1
    worker.now_ms = T0 + 20_000  # ran 20 s, past max_task_s: the coordinator may time it out
    worker.turns()
    worker.now_ms = T0 + 30_000
    worker.turns()
    assert len(worker.sink.values("heartbeat")) == 1


def test_a_coroutine_past_max_task_s_is_cancelled_cleanly_and_nacked_timeout() -> None:
    cleaned: list[str] = []

    async def slow(task: Task) -> Outcome:
        try:
            await asyncio.sleep(30)
        finally:
            cleaned.append(task.task_id)  # a cancelled coroutine still runs its cleanup
        return Ack(task.end_ms)

    worker = Worker(slow, T0, max_task_s=0.05)
    (offset,) = started(worker, the_task := task())
    worker.work()

    (nack,) = worker.sink.values("nack")
    assert nack["error"] == {
        "kind": "timeout",
        "message": "the handler ran longer than 0.05 s; cancelled",
    }
    assert cleaned == [the_task.task_id]
    assert worker.source.committed == {P0: offset + 1}
    assert worker.count("nack") == 1


def test_a_coroutines_own_timeout_error_is_a_handler_error_not_a_timeout() -> None:
    async def handler(task: Task) -> Outcome:
        await asyncio.sleep(0)
        raise TimeoutError("the source did not answer")

    worker = Worker(handler, T0)
    started(worker, task())
    worker.work()

    (nack,) = worker.sink.values("nack")
    assert nack["error"]["kind"] == HANDLER_ERROR
    assert "TimeoutError: the source did not answer" in nack["error"]["message"]


def test_a_sync_callable_that_returns_a_coroutine_is_told_to_declare_it_async() -> None:
    async def real(task: Task) -> Outcome:
        return Ack(task.end_ms)

    worker = Worker(lambda t: real(t), T0)  # looks sync: no way to know before it is called
    assert worker.runtime.kind == "thread"
    started(worker, task())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" would be a bug
        worker.work()

    (nack,) = worker.sink.values("nack")
    assert nack["error"]["kind"] == HANDLER_ERROR
    assert "declare it `async def`" in nack["error"]["message"]


def test_the_kind_of_handler_is_decided_at_start() -> None:
    class AsyncObject:
        async def __call__(self, task: Task) -> Outcome:
            return Ack(task.end_ms)

    assert Worker(AsyncObject(), T0).runtime.kind == "coroutine"
    assert Worker(ack_all, T0).runtime.kind == "thread"
    # the default concurrency follows the kind: threads are dear, coroutines cheap
    assert Worker(AsyncObject(), T0).runtime.concurrency == 100
    assert Worker(ack_all, T0).runtime.concurrency == 4


def test_a_task_is_logged_at_info_only_once_it_has_run_a_second(
    new_worker: NewWorker, caplog: pytest.LogCaptureFixture
) -> None:
    """A line per task started cost a busy worker a third of its CPU: a quick task's outcome is
    in the results and the metrics; one still running after a second is said, once."""
    caplog.set_level("INFO", logger="streams.worker")
    worker = new_worker(ack_all)
    quick, slow = task("quick"), task("slow")
    started(worker, quick, slow)
    worker.executor.run(worker.executor.held.pop(0))  # the quick one returns, the slow one runs
    worker.turns(1)
    assert [s.json()["stream_id"] for s in worker.sink.sent] == ["quick"]
    worker.now_ms += 999
    worker.turns()
    assert "started task" not in caplog.text
    worker.now_ms += 1
    worker.turns(3)
    said = [r.getMessage() for r in caplog.records if "started task" in r.getMessage()]
    assert said == [f"started task {slow.task_id} (attempt 1) 1.0 s ago; still running"]


def test_a_turn_takes_what_is_fetched_up_to_the_backpressure_limit(new_worker: NewWorker) -> None:
    """A task a turn capped a worker with hundreds of coroutines in flight below what they
    allow: their outcomes came back faster than one task a turn replaced them."""
    worker = new_worker(ack_all, concurrency=2, buffer=4)
    worker.source.assign(P0)
    for n in range(10):
        worker.source.add_task(task("s", n))
    worker.turns(1)
    assert worker.source.positions[P0] == 6  # concurrency + buffer: the rest wait in the log
    worker.turns(1)
    assert worker.source.positions[P0] == 6
    assert len(worker.executor.held) == 2


def test_a_backlog_of_expired_tasks_is_one_info_line_per_turn_and_each_at_debug(
    new_worker: NewWorker, caplog: pytest.LogCaptureFixture
) -> None:
    worker = new_worker(ack_all)
    worker.source.assign(P0)
    for n in range(40):
        worker.source.add_task(task(n=n, timeout_ms=-1 - n * 1_000))  # deadlines passed
    caplog.set_level(logging.DEBUG, logger="streams.worker")
    worker.turns(5)

    assert worker.count("expired") == 40
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    skipped = [m for m in infos if "expired" in m]
    assert 1 <= len(skipped) <= 4  # one a turn, not one a task
    counts = [re.fullmatch(r"skipped (\d+) expired task\(s\), deadlines passed up to \d+s ago "
                           r"\(each at DEBUG\)", m) for m in skipped]  # fmt: skip
    assert sum(int(c.group(1)) for c in counts if c) == 40
    assert skipped[-1].endswith("up to 39s ago (each at DEBUG)")
    debugs = [r for r in caplog.records if r.levelno == logging.DEBUG and "expired" in r.msg]
    assert len(debugs) == 40
