"""The worker runtime: consume task windows, run a handler on each, produce results.

One loop thread owns the task source and the result sink (``streams.worker.ports``; on Kafka,
``streams.kafka.worker_io``) and every piece of state; handler calls run elsewhere, up to
``concurrency`` at once (a sync handler on threads, a coroutine handler on an asyncio loop:
``streams.worker.calls``), and hand their outcome back through a queue. Each loop turn: collect
finished handler calls and produce their results; start tasks that are due; send heartbeats;
serve delivery reports; commit what is safe; apply backpressure; poll the source (which also
serves rebalances, so it is called every turn, and well within ``max.poll.interval.ms``, even
while every partition is paused).

Guarantees:

- **No task is lost.** A task's offset counts as finished only once its result is delivered
  (or it was skipped: expired or undecodable), and per partition the commit moves only over
  the contiguous prefix of finished offsets (``streams.worker.offsets``). A crash redoes
  every task after the last commit: delivery is at least once.
- **Backpressure:** at most ``concurrency + buffer`` tasks are taken and unfinished; beyond
  that every assigned partition is paused until some finish.
- **Rebalances:** on revoke the safe positions are committed; tasks of a revoked partition
  that have not started are dropped (its next owner fetches them again), running ones finish
  and their results are produced, but their commits are dropped.
- **Shutdown** (``stop()``): every partition is paused (the loop keeps polling, to serve the
  group), tasks taken but not started are nacked ``shutdown`` at once, so that the
  coordinator requeues them without waiting for a deadline; running ones get ``grace_s`` to
  finish, then are nacked ``shutdown`` too (a result that comes later is dropped). Then the
  sink is flushed, the safe positions committed and the source closed. A result not
  delivered by then leaves its task uncommitted: the next owner redoes it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from streams import clock
from streams.errors import InvalidInput
from streams.handler import SHUTDOWN, AnyHandler, HandlerKind, Nack, Outcome, Task, handler_kind
from streams.kafka.member import Fetched, Partition
from streams.wire import decode_task, stream_key
from streams.worker.backpressure import Backpressure
from streams.worker.calls import HandlerCalls, Returned
from streams.worker.commits import Committer
from streams.worker.config import WorkerConfig
from streams.worker.expiry import ExpiredTasks
from streams.worker.jobs import Job, JobBoard
from streams.worker.metrics import WorkerMetrics
from streams.worker.offsets import OffsetToken, OffsetTracker
from streams.worker.ports import CoroutineExecutor, HandlerExecutor, ResultSink, TaskSource
from streams.worker.results import heartbeat_report, heartbeat_value, result_value

log = logging.getLogger("streams.worker")

# How long one wait for a handler lasts while the buffer is full (streams.worker.backpressure):
# short, since a slot frees only once a result's delivery report is served.
HOLD_WAIT_S = 0.005
MAX_TAKEN_PER_TURN = 64  # tasks taken in one turn at most: its other work waits for them


class WorkerRuntime:
    """Runs ``handler`` for every task ``source`` gives, answering through ``sink``.

    Call ``run()`` to work in the calling thread until ``stop()``, or ``start()`` for a
    background thread and ``join()``; or drive it turn by turn: ``open()``, ``turn()``,
    ``shutdown()`` (what ``run()`` does; in-process tests do it with fakes). ``stop()`` may be
    called from any thread or a signal handler. A sync handler's calls go to ``executor`` (by
    default ``concurrency`` daemon threads), a coroutine handler's to ``coroutine_executor`` (by
    default one asyncio loop on a thread of its own); metrics to ``registry`` (the default one
    if None); ``now_ms`` is the wall clock that task times are compared with, ``monotonic_ms``
    the clock of intervals (heartbeats, a handler's run time), which a wall-clock step does not
    move. Commits while running go out at most every ``commit_interval_s``.
    """

    def __init__(
        self,
        handler: AnyHandler,
        config: WorkerConfig,
        source: TaskSource,
        sink: ResultSink,
        *,
        executor: HandlerExecutor | None = None,
        coroutine_executor: CoroutineExecutor | None = None,
        registry: CollectorRegistry | None = None,
        now_ms: Callable[[], int] = clock.now_ms,
        monotonic_ms: Callable[[], int] = clock.monotonic_ms,
        commit_interval_s: float = 0.1,
    ) -> None:
        self._config = config
        self._now_ms = now_ms
        self._monotonic_ms = monotonic_ms
        self._metrics = WorkerMetrics.for_registry(registry).of(config.pipeline)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failed = False  # the loop ended on an unexpected error (see the log)

        kind = handler_kind(handler)  # at start, not at the first task
        self.concurrency = config.concurrency_for(kind)
        buffer = config.buffer_for(kind)
        self._outcomes: queue.SimpleQueue[Returned] = queue.SimpleQueue()
        self._calls = HandlerCalls(
            handler,
            self._outcomes,
            concurrency=self.concurrency,
            max_task_s=config.max_task_s,
            executor=executor,
            coroutine_executor=coroutine_executor,
        )
        self._tracker = OffsetTracker()
        self._board = JobBoard(self.concurrency, int(config.max_task_s * 1000))
        self._redeliver: list[Job] = []
        self._expired = ExpiredTasks()
        self._backpressure = Backpressure(self.concurrency + buffer, buffer)

        self._source = source
        self._commits = Committer(source, self._tracker, commit_interval_s)
        self._sink = sink

    # -- control -------------------------------------------------------------------------

    def start(self) -> None:
        """Run the loop in a background thread."""
        self._thread = threading.Thread(target=self.run, name="tidemark-worker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the loop to shut down (see the module docs); returns at once."""
        self._stop.set()

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait for a ``start()``-ed loop to end; True if it has."""
        if self._thread is not None:
            self._thread.join(timeout_s)
            return not self._thread.is_alive()
        return True

    @property
    def stopping(self) -> bool:
        """Whether ``stop()`` was called (or a fatal error asked for it)."""
        return self._stop.is_set()

    def run(self) -> None:
        """Consume and work until ``stop()``, then shut down. Call once."""
        try:
            self.open()
            while not self._stop.is_set():
                self.turn()
        except Exception:
            self.failed = True
            log.exception("worker loop failed; shutting down")
        finally:
            self.shutdown()

    def open(self) -> None:
        """Start the executor, the sink and the source (joining the group)."""
        cfg = self._config
        log.info(
            "worker %s: consuming %s as group %s, %d %s, results to %s",
            cfg.pipeline,
            cfg.tasks_topic,
            cfg.group,
            self.concurrency,
            "handler threads" if self.kind == "thread" else "coroutines on one event loop",
            cfg.results_topic,
        )
        self._calls.start()
        self._sink.open(self.fatal)
        self._source.open(self)

    @property
    def kind(self) -> HandlerKind:
        """The handler's kind, decided when the runtime was built: on threads or on a loop."""
        return self._calls.kind

    def turn(self) -> None:
        """One turn of the loop (see the module docs)."""
        self._turn(accepting=True)

    # -- the loop ------------------------------------------------------------------------

    def _turn(self, *, accepting: bool) -> None:
        try:
            self._turn_once(accepting=accepting)
        finally:
            self._expired.report()

    def _turn_once(self, *, accepting: bool) -> None:
        self._collect_outcomes()
        self._produce_again()
        if accepting:
            self._start_due()
        self._send_heartbeats()
        self._sink.poll()
        self._commits.commit_due()
        if accepting:
            self._apply_backpressure()
        self._metrics.set_in_flight(len(self._board))
        if self._backpressure.holding:  # full for a moment: wait for a handler, not poll
            self._wait_for_outcome(HOLD_WAIT_S)
            return
        # While a handler runs, a blocking poll would keep its result waiting for the poll's
        # whole timeout (a lone 5 ms task took 63 ms to its result): look for a task without
        # blocking, then wait on the handlers' queue instead, which wakes at once.
        busy = self._board.busy
        fetched = self._source.poll(0 if busy else self._config.poll_interval_s)
        if fetched is None:
            if busy:
                self._wait_for_outcome(HOLD_WAIT_S)
            return
        self._take(fetched, accepting=accepting)
        # Then what is fetched already, up to the limit: taking a task a turn, 500 coroutines'
        # outcomes came back faster than tasks were taken to replace them.
        room = min(MAX_TAKEN_PER_TURN, self._backpressure.limit - len(self._board))
        while accepting and room > 0 and (fetched := self._source.poll(0)) is not None:
            self._take(fetched, accepting=accepting)
            room -= 1

    def _take(self, fetched: Fetched, *, accepting: bool) -> None:
        (topic, partition), offset = fetched.partition, fetched.offset
        token = self._tracker.start(fetched.partition, offset)
        if token is None:  # an unassigned partition or an offset seen already: not ours to do
            return
        try:
            task = decode_task(fetched.value)
        except InvalidInput as exc:
            log.warning("skipping an invalid task at %s[%d]@%d: %s", topic, partition, offset, exc)
            self._count("invalid")
            self._tracker.finish(token)
            return
        now_ms = self._now_ms()
        job = self._board.admit(task, token, now_ms)
        if job is None:
            self._expire(task, token, now_ms)
        elif not accepting:
            self._answer(job, Nack(SHUTDOWN, "the worker is stopping; the task was not started"))
        elif job.state == "waiting":
            early_ms = task.end_ms - now_ms
            log.info("task %s arrived %d ms before its end_ms; waiting", task.task_id, early_ms)

    def _start_due(self) -> None:
        now_ms = self._now_ms()
        started, expired = self._board.start_due(now_ms, self._monotonic_ms())
        for job in expired:
            self._expire(job.task, job.token, now_ms)
        for job in started:
            log.debug("started task %s (attempt %d)", job.task.task_id, job.task.attempt)
            self._calls.submit(job)

    def _collect_outcomes(self) -> None:
        outcomes = self._outcomes  # this thread alone takes from it: not empty means one waits
        while not outcomes.empty():
            self._returned(*outcomes.get_nowait())

    def _wait_for_outcome(self, timeout_s: float) -> None:
        try:
            job, outcome, duration_s = self._outcomes.get(timeout=timeout_s)
        except queue.Empty:
            return
        self._returned(job, outcome, duration_s)

    def _returned(self, job: Job, outcome: Outcome, duration_s: float) -> None:
        if not self._board.returned(job):  # nacked at shutdown already
            log.info("task %s finished after its shutdown nack; dropped", job.task.task_id)
            return
        self._answer(job, outcome, duration_s)

    def _answer(self, job: Job, outcome: Outcome, duration_s: float | None = None) -> None:
        """Produce the task's ack or nack; its offset is finished once that is delivered."""
        label = "ack" if not isinstance(outcome, Nack) else "nack"
        if isinstance(outcome, Nack):
            log.info("task %s: nack %s: %s", job.task.task_id, outcome.kind, outcome.message)
            if outcome.kind == SHUTDOWN:
                label = "shutdown"
        self._count(label, duration_s)
        self._board.answered(job, result_value(job.task, outcome, self._config.route))
        self._produce(job)

    def _expire(self, task: Task, token: OffsetToken, now_ms: int) -> None:
        self._expired.skipped(task, now_ms)
        self._count("expired")
        self._tracker.finish(token)

    def _count(self, outcome: str, duration_s: float | None = None) -> None:
        self._metrics.counted[outcome].inc()
        if duration_s is not None:
            self._metrics.timed[outcome].observe(duration_s)

    # -- producing -----------------------------------------------------------------------

    def _produce(self, job: Job) -> None:
        assert job.result is not None

        def delivered(error: str | None) -> None:
            if error is None:
                self._board.delivered(job)
                self._tracker.finish(job.token)
                return
            task_id = job.task.task_id
            log.error("result of task %s not delivered (%s); sending again", task_id, error)
            self._redeliver.append(job)

        self._sink.send(stream_key(job.task.stream_id), job.result, delivered)

    def _produce_again(self) -> None:
        retry, self._redeliver = self._redeliver, []
        for job in retry:
            if job.state == "answered":
                self._produce(job)

    def _send_heartbeats(self) -> None:
        mono_ms = self._monotonic_ms()
        for job in self._board.long_running(mono_ms):
            ran_s, task = (mono_ms - job.started_mono_ms) / 1000, job.task
            log.info("started task %s (attempt %d) %.1f s ago; still running", task.task_id,
                     task.attempt, ran_s)  # fmt: skip
        for job in self._board.heartbeats_due(mono_ms):
            self._sink.send(
                stream_key(job.task.stream_id),
                heartbeat_value(job.task, self._config.route),
                heartbeat_report(job.task.task_id),
            )

    # -- the source's listener (called from inside its poll) ------------------------------

    def assigned(self, partitions: list[Partition]) -> None:
        self._commits.assigned(partitions)

    def revoked(self, partitions: list[Partition]) -> None:
        """Partitions leave in order: commit their safe positions, drop tasks not started."""
        self._board.drop_unstarted(self._commits.released(partitions, commit=True))

    def lost(self, partitions: list[Partition]) -> None:
        """Partitions are gone already: drop tasks not started, commit nothing."""
        self._board.drop_unstarted(self._commits.released(partitions, commit=False))

    def commit_failed(self, partitions: list[Partition]) -> None:
        self._commits.commit_failed(partitions)

    def fatal(self, reason: str) -> None:
        """The source or the sink cannot go on: stop, and exit with a failure."""
        log.critical("stopping: %s", reason)
        self.failed = True
        self._stop.set()

    def _apply_backpressure(self) -> None:
        """Take no more than concurrency + buffer tasks at once (streams.worker.backpressure)."""
        step = self._backpressure.step(len(self._board), self._monotonic_ms())
        if step == "resume":
            self._source.resume()
        elif step == "pause":
            self._source.pause()

    # -- shutdown ------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Nack what did not start, give running tasks ``grace_s``, flush, commit, close."""
        cfg = self._config
        try:
            self._stop_fetching()
            for job in self._board.unstarted():
                self._answer(job, Nack(SHUTDOWN, "the worker stopped before the task started"))
            if running := len(self._board.running()):
                log.info("stopping: waiting up to %g s for %d running tasks", cfg.grace_s, running)
            deadline = time.monotonic() + cfg.grace_s
            while self._board.running() and time.monotonic() < deadline:
                self._turn(accepting=False)
            self._collect_outcomes()
            for job in self._board.running():
                message = f"the worker stopped; the task still ran after a {cfg.grace_s:g} s grace"
                self._answer(job, Nack(SHUTDOWN, message), time.monotonic() - job.started_s)
            self._produce_again()
            left = self._sink.flush(cfg.flush_timeout_s)
            if left:
                log.error("%d results not delivered at exit; their tasks will be redone", left)
            self._commits.commit_now()
        except Exception:
            self.failed = True
            log.exception("shutdown failed; uncommitted tasks will be redone")
        finally:
            self._metrics.set_in_flight(len(self._board))
            self._close()

    def _stop_fetching(self) -> None:
        self._source.pause()
        self._backpressure.stopped()

    def _close(self) -> None:
        try:
            self._source.close()
        except Exception:
            log.exception("closing the task source failed")
        self._calls.close(timeout_s=1.0)
        log.info("worker %s stopped", self._config.pipeline)
