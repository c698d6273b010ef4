"""No task goes to a pipeline's topic before the engine has made sure that the topic exists.

A stream of a pipeline that no worker or CLI has announced yet (its upsert came straight to
`control`) would otherwise have its first task produced to a topic that does not exist: on a
cluster that does not create topics on first use, the confluent engine's transaction would fail
on it, abort and be made again, again and again, and the Faust engine's producer would give the
task up. The engines wrap their Emitter in a `TasksTopicGuard`; the Processor and the core know
nothing of it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from streams.coordinator.ports import Emitter
from streams.coordinator.settings import CoordinatorSettings
from streams.core.config import DEFAULT_PIPELINE
from streams.errors import BrokerUnavailable
from streams.kafka.pipelines import ensure_tasks_topic
from streams.kafka.txn_errors import TransactionAborted
from streams.topics import Topics

log = logging.getLogger("streams.coordinator")


class TasksTopicGuard:
    """An Emitter that calls `ensure(pipeline)` before the first message to a pipeline's tasks
    topic (the default pipeline's is made with every other topic at start), then sends as
    `emitter` does.

    `ensure` creates the topic if it is missing and returns whether it exists now. The engines
    differ when the cluster cannot say: the confluent engine's raises TransactionAborted, so
    that nothing of the event is committed and it is handled again after the abort (an input
    skipped there would lose an upsert); the Faust engine's returns False, and the task is sent
    anyway (the producer holds it until the topic exists or gives it up, and the window's
    deadline sends it again): skipping the event there would lose it. Either way the next send
    asks again. One admin call per pipeline and process once it worked.
    """

    def __init__(self, topics: Topics, emitter: Emitter, ensure: Callable[[str], bool]) -> None:
        self._topics = topics
        self._send = emitter.send  # bound once: every output of the Processor comes through
        self._ensure = ensure
        self._known: set[str] = set()  # topics that need no check (any longer)

    def send(
        self,
        topic: str,
        key: bytes,
        value: bytes | None,
        on_delivered: Callable[[], None] | None = None,
        on_failed: Callable[[], None] | None = None,
    ) -> None:
        if topic not in self._known:
            self._check(topic)
        if on_delivered is None and on_failed is None:
            self._send(topic, key, value)  # a transactional emitter takes three
        else:
            self._send(topic, key, value, on_delivered, on_failed)

    def _check(self, topic: str) -> None:
        pipeline = self._topics.pipeline_of_tasks(topic)
        if pipeline is None or pipeline == DEFAULT_PIPELINE or self._ensure(pipeline):
            self._known.add(topic)


def tasks_topic_ensurer(
    settings: CoordinatorSettings,
    aborts: bool,
    make: Callable[..., bool] | None = None,
) -> Callable[[str], bool]:
    """The `ensure` of an engine's guard: make the pipeline's tasks topic as the coordinator
    made its own (its partitions, replication and min.insync.replicas). When the cluster does
    not answer: TransactionAborted if `aborts` (the confluent engine), else a warning and False
    (the Faust engine), as `TasksTopicGuard` says why. `make`: streams.kafka.pipelines'
    `ensure_tasks_topic` unless a test says otherwise."""

    def ensure(pipeline: str) -> bool:
        made = ensure_tasks_topic if make is None else make
        try:
            made(settings.kafka, settings.topics, pipeline, settings.partitions,
                 settings.replication, settings.min_insync_replicas)  # fmt: skip
        except BrokerUnavailable as exc:
            topic = settings.topics.tasks_for(pipeline)
            if aborts:
                raise TransactionAborted(f"could not make {topic}: {exc}") from exc
            log.warning("could not make %s (%s); its task is sent anyway", topic, exc)
            return False
        return True

    return ensure
