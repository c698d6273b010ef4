"""The worker's ports on confluent-kafka: ``KafkaTaskSource`` and ``KafkaResultSink``.

- The consumer reads committed tasks only (``read_committed``: the coordinator writes in
  transactions), commits only by hand, starts a new group at the earliest task, and uses
  cooperative-sticky assignment, so that a worker joining or leaving moves only the partitions
  it must and the others keep their running tasks.
- The producer is idempotent with ``acks=all`` (a retried send neither duplicates nor
  reorders results) and uses ``murmur2_random``, the partitioner of the Java clients and of
  the coordinator's, so that a stream's results land where the coordinator expects them.
- A task consumer that reads nothing while tasks wait on its partitions (streams.kafka.progress)
  is logged at WARNING and renewed: closed, and subscribed again.
- While no broker answers (librdkafka says all brokers are down, or its statistics show no
  connection up), the source is waiting, not failing: `brokers` (streams.kafka.reachability)
  holds since when and on what error, a WARNING says so once a minute, and the clients go on
  retrying by themselves; the first record or statistics report with a broker up ends it.

librdkafka's own log lines go to the ``streams.worker.kafka`` logger.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from streams import clock
from streams.kafka.errors import severity
from streams.kafka.member import Delivered, Fetched, Partition, SourceListener
from streams.kafka.progress import KafkaProgress
from streams.kafka.reachability import BrokerWatch
from streams.kafka.settings import KafkaSettings

log = logging.getLogger("streams.worker")
# How often librdkafka reports the group member's state (for the stall check's "out of its
# group"): a small JSON document, served by poll().
STATS_INTERVAL_MS = 5_000
kafka_log = logging.getLogger("streams.worker.kafka")


class WorkerGroup(Protocol):
    """What the clients read of a worker's settings (streams.worker.config.WorkerConfig): named
    here, so that this adapter, which the worker imports, does not import the worker."""

    @property
    def group(self) -> str: ...

    @property
    def instance_id(self) -> str | None: ...

    @property
    def session_timeout_ms(self) -> int: ...

    @property
    def tasks_topic(self) -> str: ...

    @property
    def results_topic(self) -> str: ...


def consumer_config(settings: KafkaSettings, config: WorkerGroup, **extra: Any) -> dict[str, Any]:
    """The task consumer's configuration, in the worker group."""
    group: dict[str, Any] = {
        "group.id": config.group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        **settings.group(
            "cooperative-sticky",
            "uniform",
            config.session_timeout_ms,
            min(3_000, config.session_timeout_ms // 3),
        ),
        "logger": kafka_log,
        **extra,
    }
    if config.instance_id:
        group["group.instance.id"] = config.instance_id
    return settings.consumer(**group)


def log_kafka_error(err: KafkaError, on_fatal: Callable[[str], None]) -> None:
    """Log an error a client reported, at the level it deserves; a fatal one stops the worker."""
    match severity(err):
        case "fatal":
            log.critical("fatal Kafka error, stopping: %s", err)
            on_fatal(f"fatal Kafka error: {err}")
        case "unreachable":
            log.error("no Kafka broker reachable (librdkafka retries with backoff): %s", err)
        case "transport":  # librdkafka's own log line says it already
            log.debug("Kafka: %s", err)
        case _:
            log.warning("Kafka: %s", err)


class KafkaTaskSource:
    """``TaskSource`` over a consumer of ``config.tasks_topic`` in the worker group."""

    def __init__(
        self,
        settings: KafkaSettings,
        config: WorkerGroup,
        brokers: BrokerWatch | None = None,
        now_ms: Callable[[], int] = clock.now_ms,
    ) -> None:
        self._settings = settings
        self._config = config
        self.brokers = brokers or BrokerWatch()
        self._now_ms = now_ms
        self._consumer: Consumer | None = None
        self._listener: SourceListener | None = None
        self._paused = False
        self._progress = KafkaProgress(settings)
        self._group_state: tuple[str, str] | None = None  # from librdkafka's statistics
        self.renewals = 0  # consumers renewed after a stall (streams.kafka.progress)

    def open(self, listener: SourceListener) -> None:
        self._listener = listener
        self._consumer = Consumer(
            consumer_config(
                self._settings,
                self._config,
                error_cb=lambda err: self._on_error(err, listener.fatal),
                on_commit=self._on_commit,
                stats_cb=self._on_stats,
                **{"statistics.interval.ms": STATS_INTERVAL_MS},
            )
        )
        self._group_state = None
        self._consumer.subscribe(
            [self._config.tasks_topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )

    def poll(self, timeout_s: float) -> Fetched | None:
        self._say_waiting()
        # With no partition, it is owed some only while it is out of its group (there may be
        # more workers than partitions): after a broker restart a member can stay out of its
        # group for good, its join request never sent (docs/reliability.md).
        stall = self._progress.check(
            self._client(), all_paused=self._paused, group_state=self._group_state
        )
        if stall is not None:
            self._renew(stall.describe())
        message = self._client().poll(timeout_s)
        if message is None:
            return None
        error = message.error()
        if error is not None:
            if severity(error) == "missing_topic":
                log.warning("topic %s not found (yet): %s", self._config.tasks_topic, error)
            else:
                self._on_error(error, self._the_listener().fatal)
            return None
        self.brokers.reachable(self._now_ms())
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        assert topic is not None and partition is not None and offset is not None
        return Fetched((topic, partition), offset, message.value())

    def _say_waiting(self) -> None:
        """Once a minute while no broker answers, and once when they answer again."""
        now_ms = self._now_ms()
        waiting = self.brokers.warning_due(now_ms)
        if waiting is not None:
            log.warning("%s; the worker goes on retrying", waiting.describe())
        ended = self.brokers.recovered()
        if ended is not None:
            log.warning("Kafka brokers answer again after %.0f s", ended.waited_ms / 1000)

    def _on_error(self, err: KafkaError, on_fatal: Callable[[str], None]) -> None:
        if severity(err) == "unreachable":  # log_kafka_error says it
            self.brokers.unreachable(self._now_ms(), str(err))
        log_kafka_error(err, on_fatal)

    def _renew(self, why: str) -> None:
        """Close the stalled consumer (its partitions are revoked: safe positions committed,
        tasks not started dropped) and subscribe a new one, which resumes from the committed
        offsets like any member given those partitions."""
        log.warning("the task consumer stalled, renewing it: %s", why)
        listener = self._the_listener()
        self.close()
        self.open(listener)
        self.renewals += 1
        self._progress.renewed()

    def pause(self) -> None:
        self._paused = True
        self._pause_or_resume(pause=True)

    def resume(self) -> None:
        self._paused = False
        self._pause_or_resume(pause=False)

    def _pause_or_resume(self, *, pause: bool) -> None:
        consumer = self._client()
        try:
            assignment = consumer.assignment()
            if assignment:
                (consumer.pause if pause else consumer.resume)(assignment)
        except KafkaException as exc:
            log.warning("%s the assignment failed: %s", "pausing" if pause else "resuming", exc)

    def commit(self, positions: Mapping[Partition, int], *, wait: bool) -> bool:
        offsets = [TopicPartition(t, p, o) for (t, p), o in positions.items()]
        consumer = self._client()
        try:
            if not wait:
                consumer.commit(offsets=offsets, asynchronous=True)
                return True
            answer = consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            log.warning("commit of %s failed: %s", dict(positions), exc)
            return False
        for tp in answer or []:
            if tp.error is not None:
                log.warning("commit of %s[%d] failed: %s", tp.topic, tp.partition, tp.error)
        return True

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _client(self) -> Consumer:
        if self._consumer is None:
            raise RuntimeError("the task source is not open")
        return self._consumer

    def _the_listener(self) -> SourceListener:
        if self._listener is None:
            raise RuntimeError("the task source is not open")
        return self._listener

    # librdkafka calls these from poll(); an exception in them would surface from poll().

    def _on_stats(self, stats_json: str) -> None:
        try:
            stats = json.loads(stats_json)
            cgrp = stats.get("cgrp") or {}
            self._group_state = (str(cgrp.get("state")), str(cgrp.get("join_state")))
            states = sorted({str(b.get("state")) for b in (stats.get("brokers") or {}).values()})
        except (ValueError, AttributeError):
            self._group_state = None
            return
        if "UP" in states:
            self.brokers.reachable(self._now_ms())
        elif states and self.brokers.unreachable(
            self._now_ms(), f"no broker connection up (states: {', '.join(states)})"
        ):
            log.warning("no Kafka broker connection is up; the worker waits for one")

    def _on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        failed = [(tp.topic, tp.partition) for tp in partitions if err or tp.error]
        if failed:
            log.warning("commit failed: %s", err)
            self._the_listener().commit_failed(failed)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        try:
            self._the_listener().assigned(_keys(partitions))
            consumer.incremental_assign(partitions)
            if self._paused:
                consumer.pause(partitions)
            if partitions:
                log.info("assigned %s", _names(partitions))
        except Exception:
            log.exception("handling the assignment of %s failed", _names(partitions))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._release(consumer, partitions, lost=False)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._release(consumer, partitions, lost=True)

    def _release(self, consumer: Consumer, partitions: list[TopicPartition], *, lost: bool) -> None:
        try:
            if self._paused and partitions:
                # librdkafka keeps a partition paused by the application through its loss and
                # a new assignment: a resume made while it is away (a full buffer drained
                # during a broker outage) would then leave it paused for good. It leaves
                # resumed; `_on_assign` pauses it again if it comes back while paused. (Not a
                # resume at each assignment: a pause or resume right after an assign can void
                # the assign's start offset, confluentinc/librdkafka#2190.)
                consumer.resume(partitions)
            listener = self._the_listener()
            (listener.lost if lost else listener.revoked)(_keys(partitions))
            if partitions:
                log.info("%s %s", "lost" if lost else "revoked", _names(partitions))
        except Exception:
            log.exception("handling the revocation of %s failed", _names(partitions))


class KafkaResultSink:
    """``ResultSink`` over an idempotent producer to ``config.results_topic``."""

    def __init__(self, settings: KafkaSettings, config: WorkerGroup) -> None:
        self._settings = settings
        self._topic = config.results_topic
        self._producer: Producer | None = None

    def open(self, on_fatal: Callable[[str], None]) -> None:
        self._producer = Producer(
            self._settings.producer(
                **{
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "error_cb": lambda err: log_kafka_error(err, on_fatal),
                    "logger": kafka_log,
                }
            )
        )

    def send(self, key: bytes, value: bytes, delivered: Delivered) -> None:
        def report(err: KafkaError | None, _msg: Message) -> None:
            delivered(None if err is None else str(err))

        producer = self._client()
        while True:
            try:
                producer.produce(self._topic, value, key, on_delivery=report)
                return
            except BufferError:  # the local queue is full: serve delivery reports, try again
                producer.poll(0.1)

    def poll(self) -> None:
        self._client().poll(0)

    def flush(self, timeout_s: float) -> int:
        return self._client().flush(timeout_s)

    def _client(self) -> Producer:
        if self._producer is None:
            raise RuntimeError("the result sink is not open")
        return self._producer


def _keys(partitions: list[TopicPartition]) -> list[Partition]:
    return [(tp.topic, tp.partition) for tp in partitions]


def _names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions)
