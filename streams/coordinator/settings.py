"""The coordinator's configuration: one frozen object, from the environment and flags."""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from streams.coordinator.store_history import CLEANUP_DELAY_MS
from streams.core import OutagePolicy
from streams.errors import InvalidInput
from streams.kafka.settings import KafkaSettings
from streams.topics import Topics


def _env_int(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(name, f"must be an integer, got {raw!r}") from None
    if value < minimum:
        raise InvalidInput(name, f"must be at least {minimum}, got {value}")
    return value


def _env_optional_int(env: Mapping[str, str], name: str, minimum: int) -> int | None:
    """An integer setting that may be unset (None: the cluster decides)."""
    return _env_int(env, name, 0, minimum) if env.get(name) else None


def _env_policy(env: Mapping[str, str]) -> OutagePolicy:
    """The outage guard's settings: TIDEMARK_OUTAGE_RATIO, _MIN_STREAMS, _MAX_HOLD_MS."""
    raw = env.get("TIDEMARK_OUTAGE_RATIO") or "0.5"
    try:
        ratio = float(raw)
    except ValueError:
        raise InvalidInput("TIDEMARK_OUTAGE_RATIO", f"must be a number, got {raw!r}") from None
    min_streams = _env_int(env, "TIDEMARK_OUTAGE_MIN_STREAMS", 3, 1)
    max_hold_ms = _env_int(env, "TIDEMARK_OUTAGE_MAX_HOLD_MS", 6 * 3_600_000, 0)
    try:
        return OutagePolicy(ratio, min_streams, max_hold_ms)
    except InvalidInput as exc:
        raise InvalidInput(f"TIDEMARK_{exc.field.upper()}", exc.reason) from None


ENGINES = ("confluent", "faust")


def default_instance(data_dir: Path) -> str:
    """Stable per host and data folder, so that a restart fences its own predecessor."""
    folder = hashlib.sha1(str(data_dir.resolve()).encode()).hexdigest()[:8]
    return f"{socket.gethostname()}-{folder}"


@dataclass(frozen=True)
class CoordinatorSettings:
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    topics: Topics = field(default_factory=Topics)
    data_dir: Path = Path(".data/coordinator")
    engine: str = "confluent"
    # The transactional.id suffix of the confluent engine; default_instance(data_dir) if "".
    instance_id: str = ""
    # How often the confluent engine commits a transaction under load (it also commits as soon
    # as the input runs dry); Kafka Streams uses 100 ms under exactly-once.
    commit_interval_ms: int = 100
    partitions: int = 6
    # None: the cluster's (its default.replication.factor on three brokers or more, else 1)
    # and the brokers' min.insync.replicas (streams.kafka.admin.replication_for).
    replication: int | None = None
    min_insync_replicas: int | None = None
    flush_ms: int = 200
    # The confluent engine publishes a stream's `streams` view at most this often (the status
    # page and `tidemark streams` refresh about once a second); 0: at every transaction.
    view_interval_ms: int = 1_000
    tick_interval_ms: int = 100
    session_timeout_ms: int = 10000
    # Takeover grace's bound: how long a new owner waits to read `results` as far as they stood
    # at assignment before deadlines count anyway (streams.coordinator.ownership).
    catch_up_max_ms: int = 10000
    replay_concurrency: int = 2
    web_host: str = "127.0.0.1"
    web_port: int = 6066
    # /metrics: how many laggards get a stream_id label, and what lag counts as behind.
    top_laggards: int = 20
    behind_threshold_s: int = 300
    # The outage guard (streams.core.outage, streams.coordinator.health).
    outage: OutagePolicy = field(default_factory=OutagePolicy)
    health_publish_ms: int = 1_000
    health_stale_ms: int = 30_000
    # The confluent engine deletes the store of a partition revoked from it this long after
    # (Kafka Streams' state.cleanup.delay.ms, same default): kept in case it comes back.
    state_cleanup_delay_ms: int = CLEANUP_DELAY_MS

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise InvalidInput(
                "engine", f"must be one of {', '.join(ENGINES)}, got {self.engine!r}"
            )
        if self.commit_interval_ms < 1:
            raise InvalidInput("commit_interval_ms", "must be at least 1")
        if self.partitions < 1:
            raise InvalidInput("partitions", "must be at least 1")
        if self.replication is not None and self.replication < 1:
            raise InvalidInput("replication", "must be at least 1")
        if self.min_insync_replicas is not None and not (
            1 <= self.min_insync_replicas <= (self.replication or self.min_insync_replicas)
        ):
            raise InvalidInput("min_insync_replicas", "must be between 1 and the replication")
        if self.flush_ms < 0:
            raise InvalidInput("flush_ms", "must not be negative")
        if self.view_interval_ms < 0:
            raise InvalidInput("view_interval_ms", "must not be negative")
        if self.tick_interval_ms < 10:
            raise InvalidInput("tick_interval_ms", "must be at least 10")
        if self.top_laggards < 0:
            raise InvalidInput("top_laggards", "must not be negative")
        if self.behind_threshold_s < 0:
            raise InvalidInput("behind_threshold_s", "must not be negative")
        if self.health_publish_ms < 10:
            raise InvalidInput("health_publish_ms", "must be at least 10")
        if self.health_stale_ms <= self.health_publish_ms:
            raise InvalidInput("health_stale_ms", "must be longer than health_publish_ms")
        if self.state_cleanup_delay_ms < 0:
            raise InvalidInput("state_cleanup_delay_ms", "must not be negative")

    @property
    def instance(self) -> str:
        return self.instance_id or default_instance(self.data_dir)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CoordinatorSettings:
        env = os.environ if environ is None else environ
        return cls(
            kafka=KafkaSettings.from_env(env),
            topics=Topics(env.get("TIDEMARK_TOPIC_PREFIX") or "tidemark"),
            data_dir=Path(env.get("TIDEMARK_DATA_DIR") or ".data/coordinator"),
            engine=env.get("TIDEMARK_ENGINE") or "confluent",
            instance_id=env.get("TIDEMARK_INSTANCE_ID") or "",
            commit_interval_ms=_env_int(env, "TIDEMARK_COMMIT_INTERVAL_MS", 100, 1),
            partitions=_env_int(env, "TIDEMARK_PARTITIONS", 6, 1),
            replication=_env_optional_int(env, "TIDEMARK_REPLICATION", 1),
            min_insync_replicas=_env_optional_int(env, "TIDEMARK_MIN_INSYNC_REPLICAS", 1),
            flush_ms=_env_int(env, "TIDEMARK_FLUSH_MS", 200, 0),
            view_interval_ms=_env_int(env, "TIDEMARK_VIEW_INTERVAL_MS", 1_000, 0),
            tick_interval_ms=_env_int(env, "TIDEMARK_TICK_MS", 100, 10),
            session_timeout_ms=_env_int(env, "TIDEMARK_SESSION_TIMEOUT_MS", 10000, 6000),
            catch_up_max_ms=_env_int(
                env,
                "TIDEMARK_CATCH_UP_MAX_MS",
                _env_int(env, "TIDEMARK_SESSION_TIMEOUT_MS", 10000, 6000),
                0,
            ),
            replay_concurrency=_env_int(env, "TIDEMARK_REPLAY_CONCURRENCY", 2, 1),
            web_host=env.get("TIDEMARK_WEB_HOST") or "127.0.0.1",
            web_port=_env_int(env, "TIDEMARK_WEB_PORT", 6066, 0),
            top_laggards=_env_int(env, "TIDEMARK_TOP_LAGGARDS", 20, 0),
            behind_threshold_s=_env_int(env, "TIDEMARK_BEHIND_THRESHOLD_S", 300, 0),
            outage=_env_policy(env),
            health_publish_ms=_env_int(env, "TIDEMARK_HEALTH_PUBLISH_MS", 1_000, 10),
            health_stale_ms=_env_int(env, "TIDEMARK_HEALTH_STALE_MS", 30_000, 20),
            state_cleanup_delay_ms=_env_int(
                env, "TIDEMARK_STATE_CLEANUP_DELAY_MS", CLEANUP_DELAY_MS, 0
            ),
        )
