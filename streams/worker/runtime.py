"""The worker runtime: consume task windows, run a handler on threads, produce results.

One loop thread owns the Kafka consumer and producer and every piece of state; handler calls
run on a pool of ``concurrency`` threads and hand their outcome back through a queue. Each
loop turn: collect finished handler calls and produce their results; start tasks that are due;
send heartbeats; serve producer delivery reports; commit what is safe; apply backpressure;
poll the consumer (which also serves rebalances, so it is called every turn, and well within
``max.poll.interval.ms``, even while every partition is paused).

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
  producer is flushed, the safe positions committed and the consumer closed. A result not
  delivered by then leaves its task uncommitted: the next owner redoes it.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.cimpl import Message, TopicPartition
from prometheus_client import CollectorRegistry

from streams import clock
from streams.errors import InvalidInput
from streams.handler import SHUTDOWN, Handler, Nack, Outcome, Task
from streams.kafka.settings import KafkaSettings
from streams.worker.clients import DeliveryReport, ResultProducer, task_consumer
from streams.worker.commits import Committer
from streams.worker.config import WorkerConfig
from streams.worker.jobs import Job, JobBoard
from streams.worker.metrics import WorkerMetrics
from streams.worker.offsets import OffsetToken, OffsetTracker
from streams.worker.pool import HandlerPool
from streams.worker.results import (
    checked_outcome,
    decode_task,
    error_outcome,
    heartbeat_value,
    result_value,
)

log = logging.getLogger("streams.worker")


class WorkerRuntime:
    """Runs ``handler`` for every task of ``config.tasks_topic`` in a consumer group.

    Call ``run()`` to work in the calling thread until ``stop()``, or ``start()`` for a
    background thread and ``join()``. ``stop()`` may be called from any thread or a signal
    handler. Metrics go to ``registry`` (the default one if None); ``now_ms`` is the wall
    clock that task times are compared with.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        handler: Handler,
        config: WorkerConfig,
        *,
        registry: CollectorRegistry | None = None,
        now_ms: Callable[[], int] = clock.now_ms,
    ) -> None:
        self._handler = handler
        self._config = config
        self._now_ms = now_ms
        self._metrics = WorkerMetrics.for_registry(registry)
        self._in_flight = self._metrics.in_flight.labels(pipeline=config.pipeline)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failed = False  # the loop ended on an unexpected error (see the log)

        self._tracker = OffsetTracker()
        self._board = JobBoard(config.concurrency, int(config.max_task_s * 1000))
        self._outcomes: queue.SimpleQueue[tuple[Job, Outcome, float]] = queue.SimpleQueue()
        self._redeliver: list[Job] = []
        self._paused = False

        self._consumer = task_consumer(
            settings, config, error_cb=self._on_kafka_error, on_commit=self._on_commit
        )
        self._commits = Committer(self._consumer, self._tracker)
        self._producer = ResultProducer(settings, config.results_topic, self._on_kafka_error)
        self._pool = HandlerPool(config.concurrency)

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

    def run(self) -> None:
        """Consume and work until ``stop()``, then shut down. Call once."""
        cfg = self._config
        log.info(
            "worker %s: consuming %s as group %s, %d handler threads, results to %s",
            cfg.pipeline,
            cfg.tasks_topic,
            cfg.group,
            cfg.concurrency,
            cfg.results_topic,
        )
        try:
            self._pool.start()
            self._consumer.subscribe(
                [cfg.tasks_topic],
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
            while not self._stop.is_set():
                self._turn(accepting=True)
        except Exception:
            self.failed = True
            log.exception("worker loop failed; shutting down")
        finally:
            self._shutdown()

    # -- the loop ------------------------------------------------------------------------

    def _turn(self, *, accepting: bool) -> None:
        self._collect_outcomes()
        self._produce_again()
        if accepting:
            self._start_due()
        self._send_heartbeats()
        self._producer.poll()
        self._commits.commit_due()
        if accepting:
            self._apply_backpressure()
        self._in_flight.set(len(self._board))
        message = self._consumer.poll(self._config.poll_interval_s)
        if message is not None:
            self._take(message, accepting=accepting)

    def _take(self, message: Message, *, accepting: bool) -> None:
        error = message.error()
        if error is not None:
            self._on_consumer_error(error)
            return
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        assert topic is not None and partition is not None and offset is not None
        token = self._tracker.start((topic, partition), offset)
        if token is None:  # an unassigned partition or an offset seen already: not ours to do
            return
        try:
            task = decode_task(message.value())
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
        started, expired = self._board.start_due(now_ms)
        for job in expired:
            self._expire(job.task, job.token, now_ms)
        for job in started:
            job.started_s = time.monotonic()
            log.info("started task %s (attempt %d)", job.task.task_id, job.task.attempt)
            self._pool.submit(functools.partial(self._call_handler, job))

    def _call_handler(self, job: Job) -> None:
        """On a pool thread: run the handler, never raise, hand the outcome to the loop."""
        outcome: Outcome
        try:
            outcome = checked_outcome(job.task, self._handler(job.task))
        except BaseException as exc:  # a handler error must never kill the worker
            log.warning("task %s: the handler raised", job.task.task_id, exc_info=True)
            outcome = error_outcome(exc)
        self._outcomes.put((job, outcome, time.monotonic() - job.started_s))

    def _collect_outcomes(self) -> None:
        while True:
            try:
                job, outcome, duration_s = self._outcomes.get_nowait()
            except queue.Empty:
                return
            if not self._board.returned(job):  # nacked at shutdown already
                log.info("task %s finished after its shutdown nack; dropped", job.task.task_id)
                continue
            self._answer(job, outcome, duration_s)

    def _answer(self, job: Job, outcome: Outcome, duration_s: float | None = None) -> None:
        """Produce the task's ack or nack; its offset is finished once that is delivered."""
        label = "ack" if not isinstance(outcome, Nack) else "nack"
        if isinstance(outcome, Nack):
            log.info("task %s: nack %s: %s", job.task.task_id, outcome.kind, outcome.message)
            if outcome.kind == SHUTDOWN:
                label = "shutdown"
        self._count(label, duration_s)
        self._board.answered(job, result_value(job.task, outcome))
        self._produce(job)

    def _expire(self, task: Task, token: OffsetToken, now_ms: int) -> None:
        late_ms = now_ms - task.deadline_ms
        log.info("skipping expired task %s: its deadline passed %d ms ago", task.task_id, late_ms)
        self._count("expired")
        self._tracker.finish(token)

    def _count(self, outcome: str, duration_s: float | None = None) -> None:
        pipeline = self._config.pipeline
        self._metrics.tasks.labels(pipeline=pipeline, outcome=outcome).inc()
        if duration_s is not None:
            self._metrics.duration.labels(pipeline=pipeline, outcome=outcome).observe(duration_s)

    # -- producing -----------------------------------------------------------------------

    def _produce(self, job: Job) -> None:
        assert job.result is not None

        def delivered(err: KafkaError | None, _message: Message) -> None:
            if err is None:
                self._board.delivered(job)
                self._tracker.finish(job.token)
                return
            log.error("result of task %s not delivered (%s); sending again", job.task.task_id, err)
            self._redeliver.append(job)

        self._producer.send(job.task, job.result, delivered)

    def _produce_again(self) -> None:
        retry, self._redeliver = self._redeliver, []
        for job in retry:
            if job.state == "answered":
                self._produce(job)

    def _send_heartbeats(self) -> None:
        for job in self._board.heartbeats_due(self._now_ms()):
            report = _heartbeat_report(job.task.task_id)
            self._producer.send(job.task, heartbeat_value(job.task), report)

    # -- rebalancing ------------------------------------------------------

    def _on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        self._commits.on_commit(err, partitions)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        try:
            self._commits.assigned(partitions)
            consumer.incremental_assign(partitions)
            if self._paused or self._stop.is_set():
                consumer.pause(partitions)
            if partitions:
                log.info("assigned %s", _names(partitions))
        except Exception:  # an exception here would surface from poll() and stop the loop
            log.exception("handling the assignment of %s failed", _names(partitions))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._release(partitions, commit=True)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._release(partitions, commit=False)

    def _release(self, partitions: list[TopicPartition], *, commit: bool) -> None:
        """Partitions leave this worker: commit (unless lost), drop tasks not started."""
        try:
            self._board.drop_unstarted(self._commits.released(partitions, commit=commit))
            if partitions:
                log.info("%s %s", "revoked" if commit else "lost", _names(partitions))
        except Exception:
            log.exception("handling the revocation of %s failed", _names(partitions))

    def _apply_backpressure(self) -> None:
        full = len(self._board) >= self._config.concurrency + self._config.buffer
        if full != self._paused:
            assignment = self._consumer.assignment()
            if assignment:
                (self._consumer.pause if full else self._consumer.resume)(assignment)
            self._paused = full

    # -- errors --------------------------------------------------------------------------

    def _on_kafka_error(self, err: KafkaError) -> None:
        if err.fatal():
            log.critical("fatal Kafka error, stopping: %s", err)
            self.failed = True
            self._stop.set()
        elif err.code() == KafkaError._ALL_BROKERS_DOWN:
            log.error("no Kafka broker reachable (librdkafka retries with backoff): %s", err)
        elif err.code() == KafkaError._TRANSPORT:  # librdkafka's own log line says it already
            log.debug("Kafka: %s", err)
        else:
            log.warning("Kafka: %s", err)

    def _on_consumer_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            log.warning("topic %s not found (yet): %s", self._config.tasks_topic, err)
        else:
            self._on_kafka_error(err)

    # -- shutdown ------------------------------------------------------------------------

    def _shutdown(self) -> None:
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
            left = self._producer.flush(cfg.flush_timeout_s)
            if left:
                log.error("%d results not delivered at exit; their tasks will be redone", left)
            self._commits.commit_now()
        except Exception:
            self.failed = True
            log.exception("shutdown failed; uncommitted tasks will be redone")
        finally:
            self._in_flight.set(len(self._board))
            self._close()

    def _stop_fetching(self) -> None:
        try:
            assignment = self._consumer.assignment()
            if assignment:
                self._consumer.pause(assignment)
        except KafkaException as exc:
            log.warning("pausing the assignment failed: %s", exc)
        self._paused = True

    def _close(self) -> None:
        try:
            self._consumer.close()
        except Exception:
            log.exception("closing the consumer failed")
        self._pool.close(timeout_s=1.0)
        log.info("worker %s stopped", self._config.pipeline)


def _heartbeat_report(task_id: str) -> DeliveryReport:
    def delivered(err: KafkaError | None, _message: Message) -> None:
        if err is not None:
            log.warning("heartbeat of task %s not delivered: %s", task_id, err)

    return delivered


def _names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions)
