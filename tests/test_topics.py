"""The topics the coordinator creates: co-partitioned inputs, compacted and kept ones."""

from __future__ import annotations

import pytest

from streams.coordinator.settings import CoordinatorSettings
from streams.errors import InvalidInput
from streams.kafka.admin import replication_for
from streams.topics import Topics, TopicSpec


def test_specs_name_every_topic_with_its_partitions_and_policy() -> None:
    specs = {s.name: s for s in Topics("tm").specs(partitions=6, replication=1)}
    assert set(specs) == {
        "tm.control", "tm.results", "tm.ticks", "tm.tasks", "tm.commits", "tm.rejected",
        "tm.bypassed", "tm.streams", "tm-coordinator-streams-changelog",
        "tm-coordinator-replays-changelog", "tm-coordinator-eos-changelog", "tm.health",
        "tm.pipelines", "tm.sources",
    }  # fmt: skip
    assert specs.pop("tm.health").partitions == 1  # read whole by every coordinator
    sources = specs.pop("tm.sources")  # each source's limits, read whole too
    assert (sources.partitions, sources.config) == (1, {"cleanup.policy": "compact"})
    assert specs.pop("tm.pipelines").partitions == 1  # the registry, read whole by the CLI
    assert {s.partitions for s in specs.values()} == {6}
    # requests only: readers take configs from the compacted views on tm.streams
    assert specs["tm.control"].config == {"retention.ms": str(7 * 86_400_000)}
    for compacted in ("tm.bypassed", "tm.streams", "tm-coordinator-streams-changelog"):
        assert specs[compacted].config == {"cleanup.policy": "compact"}
    # The confluent engine's changelog holds states up to 8 MiB (the core's bounds allow 2.5 MB).
    assert specs["tm-coordinator-eos-changelog"].config == {
        "cleanup.policy": "compact", "max.message.bytes": str(8 * 1024 * 1024)}  # fmt: skip


def test_replication_is_left_to_the_cluster_unless_set_and_min_isr_only_when_set() -> None:
    assert {s.replication for s in Topics("tm").specs(partitions=6)} == {None}
    specs = Topics("tm").specs(partitions=6, replication=3, min_insync=2)
    assert {s.replication for s in specs} == {3}
    assert {s.config.get("min.insync.replicas") for s in specs} == {"2"}
    assert specs[0].config["retention.ms"]  # the other settings of a topic are kept


def test_three_brokers_or_more_take_the_brokers_default_and_fewer_take_one() -> None:
    assert [replication_for(n, broker_default=3) for n in (1, 2, 3, 5)] == [1, 1, 3, 3]
    assert replication_for(4, broker_default=1) == 1  # the cluster's own choice, warned about


def test_the_settings_read_replication_and_min_isr_from_the_environment() -> None:
    assert CoordinatorSettings.from_env({}).replication is None
    env = {"TIDEMARK_REPLICATION": "3", "TIDEMARK_MIN_INSYNC_REPLICAS": "2"}
    settings = CoordinatorSettings.from_env(env)
    assert (settings.replication, settings.min_insync_replicas) == (3, 2)
    with pytest.raises(InvalidInput, match="min_insync_replicas"):
        CoordinatorSettings(replication=2, min_insync_replicas=3)


def test_a_pipelines_tasks_topic_is_named_in_one_place() -> None:
    """`default` keeps `{prefix}.tasks`, so that an existing deployment upgrades as it is."""
    topics = Topics("tm")
    assert topics.tasks_for("default") == "tm.tasks" == topics.tasks
    assert topics.tasks_for("logs") == "tm.tasks.logs"
    assert topics.pipeline_of_tasks("tm.tasks") == "default"
    assert topics.pipeline_of_tasks("tm.tasks.logs") == "logs"
    for other in ("tm.results", "tm.tasks.", "other.tasks.logs", "tm.tasks.a.b"):
        assert topics.pipeline_of_tasks(other) is None
    with pytest.raises(InvalidInput) as caught:
        topics.tasks_for("a.b")
    assert caught.value.field == "pipeline"


def test_a_pipelines_tasks_topic_is_made_like_the_default_one() -> None:
    (spec,) = Topics("tm").tasks_specs("logs", partitions=4, replication=3, min_insync=2)
    default = {s.name: s for s in Topics("tm").specs(4, 3, 2)}["tm.tasks"]
    assert spec == TopicSpec("tm.tasks.logs", default.partitions, 3, default.config)
    assert Topics("tm").tasks_specs("default", partitions=4) == [
        s for s in Topics("tm").specs(4) if s.name == "tm.tasks"
    ]
