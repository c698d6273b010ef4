"""Topic names and specs: `{prefix}.control`, `{prefix}.results`, ... and the internal ones.

Read by every part (the coordinator, the worker, the read model, the dashboard and the CLI), so
it imports no client: `streams.kafka.admin.create_topics` turns the specs into topics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from streams.core.config import DEFAULT_PIPELINE, check_pipeline
from streams.errors import InvalidInput

COMPACTED = {"cleanup.policy": "compact"}
# `control` is input only: every reader takes configs from the compacted `streams` views, so
# control keeps a week of requests (time for a coordinator that was down to read them), no more.
CONTROL_RETENTION_MS = 7 * 86_400_000
CONTROL_RETENTION = {"retention.ms": str(CONTROL_RETENTION_MS)}
MAX_STATE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication: int | None = None  # None: the cluster's (streams.kafka.admin.replication_for)
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Topics:
    prefix: str = "tidemark"

    @property
    def control(self) -> str:
        return f"{self.prefix}.control"

    @property
    def results(self) -> str:
        return f"{self.prefix}.results"

    @property
    def ticks(self) -> str:
        return f"{self.prefix}.ticks"

    @property
    def tasks(self) -> str:
        """The default pipeline's tasks topic (`tasks_for(DEFAULT_PIPELINE)`)."""
        return tasks_topic(self.prefix, DEFAULT_PIPELINE)

    def tasks_for(self, pipeline: str) -> str:
        """The topic of a pipeline's tasks, which only its workers read (one group per pipeline,
        with its own lag, scaling and retention): `{prefix}.tasks.{pipeline}`, and the default
        pipeline's `{prefix}.tasks`, the topic every worker read before pipelines existed, so
        that an existing deployment upgrades as it is. Raises InvalidInput for a bad name."""
        return tasks_topic(self.prefix, pipeline)

    def pipeline_of_tasks(self, topic: str) -> str | None:
        """The pipeline whose tasks `topic` holds (the inverse of `tasks_for`), or None."""
        default = self.tasks
        if topic == default:
            return DEFAULT_PIPELINE
        if not topic.startswith(default + "."):
            return None
        pipeline = topic[len(default) + 1 :]
        return pipeline if pipeline and _is_pipeline(pipeline) else None

    @property
    def commits(self) -> str:
        return f"{self.prefix}.commits"

    @property
    def bypassed(self) -> str:
        return f"{self.prefix}.bypassed"

    @property
    def streams(self) -> str:
        """Compacted: every stream's current view (streams.core.view), a tombstone once deleted."""
        return f"{self.prefix}.streams"

    @property
    def rejected(self) -> str:
        return f"{self.prefix}.rejected"

    @property
    def health(self) -> str:
        """Per partition, the failing and total streams of each source (the outage guard)."""
        return f"{self.prefix}.health"

    @property
    def sources(self) -> str:
        """Compacted, one partition: each source's limits as a coordinator applied them
        (streams.wire.sources), a tombstone once deleted; read whole by every coordinator."""
        return f"{self.prefix}.sources"

    @property
    def pipelines(self) -> str:
        """The pipeline registry: each live worker's announcement of the pipeline it serves, a
        tombstone once it stops cleanly (streams.registry)."""
        return f"{self.prefix}.pipelines"

    @property
    def app_id(self) -> str:
        """The Faust app id, which is also the coordinators' consumer group."""
        return f"{self.prefix}-coordinator"

    @property
    def eos_group(self) -> str:
        """The confluent engine's consumer group (and transactional.id prefix).

        Apart from Faust's group: Faust's members speak their own assignor protocol.
        """
        return f"{self.app_id}-eos"

    @property
    def eos_changelog(self) -> str:
        """The confluent engine's changelog: both of its tables, by key prefix."""
        return f"{self.eos_group}-changelog"

    @property
    def changelog(self) -> str:
        return f"{self.app_id}-streams-changelog"

    @property
    def replays_changelog(self) -> str:
        return f"{self.app_id}-replays-changelog"

    def specs(
        self, partitions: int, replication: int | None = None, min_insync: int | None = None
    ) -> list[TopicSpec]:
        """Every topic the coordinator reads or writes, with its partition count and config.

        `control`, `results`, `ticks` and the tables' changelogs are co-partitioned: the same
        partition count and key partitioner, so that one stream's events and state meet in one
        partition. `replication` None leaves it to the cluster (streams.kafka.admin.
        replication_for); `min_insync` None leaves `min.insync.replicas` to the brokers.
        """
        isr = {} if min_insync is None else {"min.insync.replicas": str(min_insync)}

        def spec(name: str, count: int, config: Mapping[str, str] | None = None) -> TopicSpec:
            return TopicSpec(name, count, replication, {**(config or {}), **isr})

        # A pipeline's tasks topic is made as the default one is (`tasks_specs`).
        same = [self.results, self.ticks, self.tasks, self.commits, self.rejected]
        specs = [spec(name, partitions) for name in same]
        # Control holds requests, not configs (those come back from `streams`): a week of them.
        # Not compacted: that would drop an upsert behind a later pause of the same stream
        # before a coordinator that was down has read it.
        specs.insert(0, spec(self.control, partitions, CONTROL_RETENTION))
        specs.append(spec(self.bypassed, partitions, COMPACTED))
        specs.append(spec(self.streams, partitions, COMPACTED))
        # Read whole by every coordinator, like a global table: one partition, one entry per
        # partition of the streams (streams.coordinator.health).
        specs.append(spec(self.health, 1, COMPACTED))
        # Also read whole by every coordinator: a handful of entries, one per limited source.
        specs.append(spec(self.sources, 1, COMPACTED))
        specs.append(self.pipelines_spec(replication, min_insync))
        specs.append(spec(self.changelog, partitions, COMPACTED))
        specs.append(spec(self.replays_changelog, partitions, COMPACTED))
        # A stream's state can outgrow Kafka's default 1 MiB at the bounds streams.core allows
        # (1,000 windows in flight, each with a 2,000-character error, and 64 KiB of params:
        # about 2.5 MB); a record that cannot be written would abort every transaction.
        big = {**COMPACTED, "max.message.bytes": str(MAX_STATE_BYTES)}
        specs.append(spec(self.eos_changelog, partitions, big))
        return specs

    def pipelines_spec(
        self, replication: int | None = None, min_insync: int | None = None
    ) -> TopicSpec:
        """The registry's topic: compacted, one partition (a handful of entries, one per live
        worker, read whole by the CLI and the status page); a worker makes it if it is missing."""
        isr = {} if min_insync is None else {"min.insync.replicas": str(min_insync)}
        return TopicSpec(self.pipelines, 1, replication, {**COMPACTED, **isr})

    def tasks_specs(
        self,
        pipeline: str,
        partitions: int,
        replication: int | None = None,
        min_insync: int | None = None,
    ) -> list[TopicSpec]:
        """The tasks topic of `pipeline`, with the settings of the default one; the CLI, the
        worker and the coordinator create it before a task of the pipeline is sent (a producer
        would wait for it, or, inside a transaction, abort again and again)."""
        isr = {} if min_insync is None else {"min.insync.replicas": str(min_insync)}
        return [TopicSpec(self.tasks_for(pipeline), partitions, replication, isr)]


@lru_cache(maxsize=1024)
def tasks_topic(prefix: str, pipeline: str) -> str:
    """`Topics(prefix).tasks_for(pipeline)`; cached, as the coordinator asks it per task."""
    if pipeline == DEFAULT_PIPELINE:
        return f"{prefix}.tasks"
    return f"{prefix}.tasks.{check_pipeline(pipeline)}"


def _is_pipeline(name: str) -> bool:
    try:
        check_pipeline(name)
    except InvalidInput:
        return False
    return True
