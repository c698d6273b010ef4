"""The topics the coordinator creates: co-partitioned inputs, compacted and kept ones."""

from __future__ import annotations

from streams.coordinator.topics import Topics


def test_specs_name_every_topic_with_its_partitions_and_policy() -> None:
    specs = {s.name: s for s in Topics("tm").specs(partitions=6, replication=1)}
    assert set(specs) == {
        "tm.control", "tm.results", "tm.ticks", "tm.tasks", "tm.commits", "tm.rejected",
        "tm.bypassed", "tm.streams", "tm-coordinator-streams-changelog",
        "tm-coordinator-replays-changelog", "tm-coordinator-eos-changelog", "tm.health",
    }  # fmt: skip
    assert specs.pop("tm.health").partitions == 1  # read whole by every coordinator
    assert {s.partitions for s in specs.values()} == {6}
    # requests only: readers take configs from the compacted views on tm.streams
    assert specs["tm.control"].config == {"retention.ms": str(7 * 86_400_000)}
    for compacted in ("tm.bypassed", "tm.streams", "tm-coordinator-streams-changelog"):
        assert specs[compacted].config == {"cleanup.policy": "compact"}
    # The confluent engine's changelog holds states up to 8 MiB (the core's bounds allow 2.5 MB).
    assert specs["tm-coordinator-eos-changelog"].config == {
        "cleanup.policy": "compact", "max.message.bytes": str(8 * 1024 * 1024)}  # fmt: skip
