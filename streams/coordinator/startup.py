"""What both engines do before they start: create topics, check them, refuse a silent switch."""

from __future__ import annotations

import logging

from streams.coordinator.settings import CoordinatorSettings
from streams.kafka.admin import create_topics, partition_counts, wait_ready
from streams.kafka.changelog import has_records

log = logging.getLogger("streams.coordinator")


def prepare_topics(settings: CoordinatorSettings) -> None:
    """Create missing topics; refuse to start when co-partitioned ones disagree."""
    wait_ready(settings.kafka, timeout_s=30)
    specs = settings.topics.specs(settings.partitions, settings.replication)
    created = create_topics(settings.kafka, specs)
    if created:
        log.info("created topics %s", ", ".join(created))
    t = settings.topics
    counts = partition_counts(
        settings.kafka,
        [t.control, t.results, t.ticks, t.changelog, t.replays_changelog, t.eos_changelog],
    )
    wrong = {name: n for name, n in counts.items() if n != settings.partitions}
    if wrong:
        raise SystemExit(
            f"topics {wrong} do not have {settings.partitions} partitions; they must be "
            "co-partitioned with the table (set TIDEMARK_PARTITIONS to match, or recreate them)"
        )
    refuse_engine_switch(settings)


def refuse_engine_switch(settings: CoordinatorSettings) -> None:
    """Stop an engine from starting empty over state that the other engine keeps.

    The engines keep state in different changelogs and consumer groups. Starting the other one
    over a prefix with live streams would start every stream afresh from its `start_ms`, so
    it is refused with what to do instead.
    """
    t = settings.topics
    mine, theirs, other = (
        (t.eos_changelog, t.changelog, "faust")
        if settings.engine == "confluent"
        else (t.changelog, t.eos_changelog, "confluent")
    )
    n = settings.partitions
    if has_records(settings.kafka, mine, n) or not has_records(settings.kafka, theirs, n):
        return
    raise SystemExit(
        f"the streams of prefix {t.prefix!r} are kept by the {other} engine (in {theirs}), and "
        f"the {settings.engine} engine has no state of them. Keep running that engine "
        f"(--engine {other} or TIDEMARK_ENGINE={other}); to move to the {settings.engine} "
        "engine, start it under a new TIDEMARK_TOPIC_PREFIX and create the streams there "
        "with their current progress as start (`tidemark streams list --output json` shows "
        "each stream's config and downstream_ms), then stop the old coordinators."
    )
