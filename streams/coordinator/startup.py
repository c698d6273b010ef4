"""What both engines do before they start: say what starts, create topics, check them, refuse
a silent switch."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from streams import buildinfo
from streams.coordinator.settings import CoordinatorSettings
from streams.errors import BrokerUnavailable
from streams.kafka.admin import (
    REPLICATED_FROM_BROKERS,
    create_topics,
    partition_counts,
    replication_defaults,
    wait_ready,
)
from streams.kafka.changelog import has_records

log = logging.getLogger("streams.coordinator")

STOPPED = "tidemark coordinator stopped"  # the last line either engine logs


def say_starting(settings: CoordinatorSettings, engine: str) -> None:
    """The first line either engine logs: its version, engine, instance, topics, brokers and
    web port (where its /health and /metrics are)."""
    log.info(
        "tidemark coordinator %s starting: engine %s, instance %s, topics %s.*, Kafka %s, "
        "/health and /metrics http://%s:%d",
        buildinfo.version(), engine, settings.instance, settings.topics.prefix,
        settings.kafka.bootstrap_servers, settings.web_host, settings.web_port,
    )  # fmt: skip


def prepare_topics(settings: CoordinatorSettings) -> CoordinatorSettings:
    """Create missing topics; refuse to start when co-partitioned ones disagree. Return the
    settings with the replication the topics were created with."""
    wait_ready(settings.kafka, timeout_s=30)
    replication = settings.replication or choose_replication(settings)
    specs = settings.topics.specs(settings.partitions, replication, settings.min_insync_replicas)
    created = create_topics(settings.kafka, specs)
    if created:
        log.info("created topics %s (replication %d)", ", ".join(created), replication)
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
    return replace(settings, replication=replication)


# A start that finds no cluster tries again after 1, 2, 4 ... 30 s.
START_RETRY_MAX_S = 30.0


def prepare_topics_waiting(
    settings: CoordinatorSettings,
    stop_asked: Callable[[float], bool] | None = None,
    prepare: Callable[[CoordinatorSettings], CoordinatorSettings] = prepare_topics,
) -> CoordinatorSettings:
    """`prepare_topics`, tried again while the cluster does not answer, saying so each time.

    A coordinator restarted while a node or the controller quorum is down (a cluster's
    maintenance, the chaos run's two-down fault) used to exit at once ("could not create
    topic ... Timed out waiting for controller"), and its supervisor restarted it into the same
    exit. It now waits, as a running one does. `stop_asked(s)` waits up to `s` seconds and
    returns whether a stop was asked meanwhile (SIGTERM, Ctrl-C): then it exits, status 1.
    """
    if stop_asked is None:
        stop_asked = _sleep
    backoff_s = 1.0
    while True:
        try:
            return prepare(settings)
        except BrokerUnavailable as exc:
            log.warning("the cluster at %s does not answer (%s); the coordinator waits for it, "
                        "trying again in %.0f s", settings.kafka.bootstrap_servers, exc,
                        backoff_s)  # fmt: skip
            if stop_asked(backoff_s):
                raise SystemExit("stopped while waiting for the cluster") from exc
            backoff_s = min(START_RETRY_MAX_S, backoff_s * 2)


def _sleep(wait_s: float) -> bool:
    """The Faust engine's wait: a SIGTERM or Ctrl-C there ends the process as Python does."""
    time.sleep(wait_s)
    return False


def choose_replication(settings: CoordinatorSettings) -> int:
    """The cluster's replication (streams.kafka.admin.replication_for), with a warning when a
    cluster of three brokers or more would keep Tidemark's topics less safe than production
    needs: replication 3 and `min.insync.replicas` 2 (see the README)."""
    found = replication_defaults(settings.kafka)
    min_insync = settings.min_insync_replicas or found.min_insync or 1
    if found.brokers >= REPLICATED_FROM_BROKERS and (found.replication < 3 or min_insync < 2):
        log.warning(
            "the cluster has %d brokers, and topics take its default.replication.factor %d "
            "with min.insync.replicas %d: one broker lost can lose acknowledged records or stop "
            "every write. Set default.replication.factor=3 and min.insync.replicas=2 on the "
            "brokers (or TIDEMARK_REPLICATION=3 and TIDEMARK_MIN_INSYNC_REPLICAS=2)",
            found.brokers, found.replication, min_insync,
        )  # fmt: skip
    return found.replication


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
