"""A worker's announcements on the compacted `{prefix}.pipelines` topic (streams.worker.registry
says when): one long-lived producer, each publish confirmed or raised as BrokerUnavailable."""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import KafkaError, Message, Producer

from streams.errors import BrokerUnavailable
from streams.kafka.admin import create_topics
from streams.kafka.lag import consumer_lag
from streams.kafka.settings import KafkaSettings
from streams.registry import PipelineInfo
from streams.topics import Topics

PUBLISH_TIMEOUT_S = 10.0


class KafkaRegistryPublisher:
    """Writes one worker's registry entries (and its tombstone) to the `pipelines` topic."""

    def __init__(self, settings: KafkaSettings, topics: Topics) -> None:
        self.topic = topics.pipelines
        self._settings = settings
        timeout_ms = int(PUBLISH_TIMEOUT_S * 1000)
        self._producer = Producer(
            settings.producer(**{"message.timeout.ms": timeout_ms, "log_level": 0})
        )

    def __call__(self, key: bytes, value: bytes | None) -> None:
        """Publish one entry (None: the tombstone); raises BrokerUnavailable if unconfirmed."""
        errors: list[KafkaError] = []

        def delivered(error: KafkaError | None, _msg: Message) -> None:
            if error is not None:
                errors.append(error)

        self._producer.produce(self.topic, value, key, on_delivery=delivered)
        left = self._producer.flush(PUBLISH_TIMEOUT_S + 1)
        if errors or left:
            reason = errors[0].str() if errors else "no acknowledgement in time"
            where = f"{self.topic} at {self._settings.bootstrap_servers}"
            raise BrokerUnavailable(f"could not announce the pipeline on {where}: {reason}")


def ensure_registry_topic(settings: KafkaSettings, topics: Topics) -> bool:
    """Make the `pipelines` topic if it is missing (a deployment older than the registry);
    True if this call made it. Raises BrokerUnavailable (no right to create topics, say)."""
    return bool(create_topics(settings, [topics.pipelines_spec()]))


def pipeline_lags(
    settings: KafkaSettings, topics: Topics, infos: Iterable[PipelineInfo], timeout_s: float
) -> dict[str, int]:
    """Each pipeline's consumer lag: its workers' groups on its tasks topic, summed over the
    partitions (pipelines whose groups have committed nothing are left out). Raises
    BrokerUnavailable when the cluster does not answer."""
    wanted = {(group, topics.tasks_for(info.name)): info.name for info in infos
              for group in info.groups}  # fmt: skip
    if not wanted:
        return {}
    rows = consumer_lag(
        settings,
        tuple(sorted({group for group, _ in wanted})),
        timeout_s=timeout_s,
        topics=sorted({topic for _, topic in wanted}),
    )
    lags: dict[str, int] = {}
    for row in rows:
        name = wanted.get((row.group, row.topic))
        if name is not None:
            lags[name] = lags.get(name, 0) + row.lag
    return lags
