"""A pipeline's tasks topic, made before the first task for it is sent (streams.topics names it).

Three parts make it, whichever comes first: the CLI when it creates a stream of the pipeline, a
worker of the pipeline when it starts, and the coordinator before it sends the pipeline's first
task (streams.coordinator.pipelines). Each makes it as the default pipeline's `{prefix}.tasks`
is made, with as many partitions as that one has where the caller does not say.
"""

from __future__ import annotations

import logging

from streams.core.config import DEFAULT_PIPELINE
from streams.kafka.admin import create_topics, partition_counts
from streams.kafka.settings import KafkaSettings
from streams.topics import Topics

log = logging.getLogger("streams.kafka")

# The partitions of a pipeline's topic when no `{prefix}.tasks` exists to copy (as `tidemark
# topics create` and the coordinator default to).
DEFAULT_TASKS_PARTITIONS = 6


def ensure_tasks_topic(
    settings: KafkaSettings,
    topics: Topics,
    pipeline: str,
    partitions: int | None = None,
    replication: int | None = None,
    min_insync: int | None = None,
    timeout_s: float = 30.0,
) -> bool:
    """Create the tasks topic of `pipeline` unless it exists; return whether it was created.

    `partitions` None: as many as `{prefix}.tasks` has (DEFAULT_TASKS_PARTITIONS without it);
    `replication` None: the cluster's choice (streams.kafka.admin.replication_for). The default
    pipeline's topic is one of the coordinator's own, made with them, and made here only when
    missing. Raises BrokerUnavailable when the cluster does not answer or refuses.
    """
    name = topics.tasks_for(pipeline)
    if partitions is None:
        found = partition_counts(settings, [topics.tasks, name], timeout_s)
        if name in found:
            return False
        partitions = found.get(topics.tasks, DEFAULT_TASKS_PARTITIONS)
    specs = topics.tasks_specs(pipeline, partitions, replication, min_insync)
    created = bool(create_topics(settings, specs, timeout_s))
    if created and pipeline != DEFAULT_PIPELINE:
        log.info("created %s, the tasks topic of pipeline %r (%d partitions)",
                 name, pipeline, partitions)  # fmt: skip
    return created
