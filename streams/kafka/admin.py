"""Cluster checks and topic creation through confluent-kafka's AdminClient."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # missing in its stub
    AdminClient,
    ConfigResource,
    ResourceType,
)
from confluent_kafka.cimpl import NewTopic

from streams.errors import BrokerUnavailable
from streams.kafka.errors import broker_errors, error_code
from streams.kafka.settings import KafkaSettings
from streams.topics import TopicSpec

# From this many brokers on, topics take the brokers' default.replication.factor.
REPLICATED_FROM_BROKERS = 3


def replication_for(brokers: int, broker_default: int) -> int:
    """The replication factor of a topic created without one.

    Three brokers or more: the brokers' own `default.replication.factor` (production sets it to
    3, with `min.insync.replicas` 2, which topics take from the brokers too). Fewer: 1, which
    a development broker or two can always hold, whatever their default says.
    """
    return broker_default if brokers >= REPLICATED_FROM_BROKERS else 1


@dataclass(frozen=True)
class ReplicationDefaults:
    brokers: int
    replication: int  # what a topic created without one gets: replication_for
    min_insync: int | None  # the brokers' min.insync.replicas; read from three brokers on


def admin_client(settings: KafkaSettings) -> AdminClient:
    return AdminClient(settings.librdkafka())


def wait_ready(settings: KafkaSettings, timeout_s: float = 10.0) -> int:
    """Block until a metadata request answers; return the broker count.

    Raises BrokerUnavailable naming the address once `timeout_s` has passed, so that no caller
    hangs on a cluster that is not there.
    """
    refused: list[str] = []

    def on_error(err: KafkaError) -> None:
        if err.code() == KafkaError._AUTHENTICATION:
            refused.append(err.str())

    # librdkafka would print every refused connection while we wait; we report once instead.
    client = AdminClient(settings.librdkafka(log_level=0, error_cb=on_error))
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while True:
        client.poll(0)  # serves the error callback
        if refused:  # waiting longer cannot help: say so at once
            raise BrokerUnavailable(
                f"the broker at {settings.bootstrap_servers} refused the credentials: {refused[0]}"
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise BrokerUnavailable(
                f"no Kafka broker answered at {settings.bootstrap_servers} within {timeout_s:g} s"
                + (f" ({_reason(last)})" if last else "")
                + "; check that Kafka runs there, or set KAFKA_BOOTSTRAP_SERVERS "
                "(or --bootstrap-servers) to its address"
            )
        try:
            metadata = client.list_topics(timeout=min(remaining, 2.0))
            if metadata.brokers:
                return len(metadata.brokers)
        except KafkaException as exc:
            last = exc
        time.sleep(0.1)


def _reason(exc: Exception) -> str:
    """librdkafka's words for a failed request, without the KafkaError{code=...} wrapping."""
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)


# A request lost in flight, not refused: librdkafka replaced the broker handle it went to (it
# swaps the handles of the bootstrap addresses for the brokers it learns: seen right after a
# three-node cluster started), or the controller moved. Sent again, the topic is created or
# already exists.
_RESEND = frozenset(
    {
        KafkaError._DESTROY_BROKER,
        KafkaError._TRANSPORT,
        KafkaError.NOT_CONTROLLER,
        KafkaError.REQUEST_TIMED_OUT,
    }
)


def create_topics(
    settings: KafkaSettings,
    specs: Iterable[TopicSpec],
    timeout_s: float = 30.0,
    admin: AdminClient | None = None,
) -> list[str]:
    """Create the topics that are missing; return the names created. Existing ones are kept.

    A request lost in flight (_RESEND) is sent again until `timeout_s`; a topic it created
    anyway then counts as existing.
    """
    specs = list(specs)
    if not specs:
        return []
    client = admin_client(settings) if admin is None else admin
    default = 1
    if any(s.replication is None for s in specs):
        default = replication_defaults(settings, timeout_s).replication
    pending = [
        NewTopic(
            s.name,
            num_partitions=s.partitions,
            replication_factor=default if s.replication is None else s.replication,
            config=dict(s.config),
        )
        for s in specs
    ]
    deadline = time.monotonic() + timeout_s
    created: list[str] = []
    while pending:
        remaining_s = max(0.1, deadline - time.monotonic())
        again: set[str] = set()
        for name, future in client.create_topics(pending, request_timeout=remaining_s).items():
            try:
                future.result(timeout=remaining_s)
                created.append(name)
            except concurrent.futures.TimeoutError:
                raise BrokerUnavailable(
                    f"no answer from {settings.bootstrap_servers} creating topic {name} "
                    f"within {timeout_s:g} s"
                ) from None
            except KafkaException as exc:
                code = error_code(exc)
                if code == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                if code in _RESEND and time.monotonic() < deadline:
                    again.add(name)
                    continue
                raise BrokerUnavailable(f"could not create topic {name}: {exc}") from exc
        pending = [t for t in pending if t.topic in again]
        if pending:
            time.sleep(0.2)
    return created


def partition_counts(
    settings: KafkaSettings, names: Iterable[str], timeout_s: float = 10.0
) -> dict[str, int]:
    """Partition count per existing topic among `names` (missing topics are left out).

    Raises BrokerUnavailable when the cluster does not answer within `timeout_s`.
    """
    with broker_errors(f"could not list the topics at {settings.bootstrap_servers}"):
        metadata = AdminClient(settings.librdkafka(log_level=0)).list_topics(timeout=timeout_s)
    return {
        n: len(metadata.topics[n].partitions)
        for n in names
        if n in metadata.topics and metadata.topics[n].error is None
    }


@dataclass(frozen=True)
class TopicIdentity:
    """Which topic of a name this is (a deleted and re-created topic gets a new id), and the
    configuration it has now."""

    topic_id: str
    config: Mapping[str, str]


def describe_topic(settings: KafkaSettings, name: str, timeout_s: float = 30.0) -> TopicIdentity:
    """The topic's id and its configuration (the broker's defaults included).

    A topic created a moment ago is unknown to the broker's metadata for a moment: asked again
    until `timeout_s`. Raises BrokerUnavailable when the cluster does not answer in time or the
    topic does not exist.
    """
    client = AdminClient(settings.librdkafka(log_level=0))
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            described = client.describe_topics(TopicCollection([name]), request_timeout=10)
            topic = described[name].result(timeout=timeout_s)
            resource = ConfigResource(ResourceType.TOPIC, name)
            configs = client.describe_configs([resource], request_timeout=10)
            entries = next(iter(configs.values())).result(timeout=timeout_s)
            return TopicIdentity(
                str(topic.topic_id), {key: entry.value for key, entry in entries.items()}
            )
        except (KafkaException, concurrent.futures.TimeoutError) as exc:
            code = error_code(exc) if isinstance(exc, KafkaException) else None
            if code != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise BrokerUnavailable(
                    f"could not describe topic {name} at {settings.bootstrap_servers}: {exc}"
                ) from exc
            time.sleep(0.2)


@dataclass(frozen=True)
class PartitionState:
    leader: int  # -1 while the partition has none
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class ClusterState:
    """Who is up and who leads what, as one metadata answer saw it."""

    brokers: frozenset[int]  # registered, unfenced brokers
    partitions: Mapping[tuple[str, int], PartitionState]


def cluster_state(settings: KafkaSettings, timeout_s: float = 5.0) -> ClusterState:
    """One metadata request from a fresh client (nothing cached from an earlier call).

    Raises BrokerUnavailable when no broker answers within `timeout_s`.
    """
    with broker_errors(f"no metadata from {settings.bootstrap_servers}"):
        metadata = AdminClient(settings.librdkafka(log_level=0)).list_topics(timeout=timeout_s)
    partitions = {
        (name, p.id): PartitionState(int(p.leader), tuple(p.replicas), tuple(p.isrs))
        for name, topic in metadata.topics.items()
        for p in topic.partitions.values()
    }
    return ClusterState(frozenset(metadata.brokers), partitions)


# How long one broker is given to describe its configuration before the next one is asked.
BROKER_CONFIG_TRY_S = 3.0
_NEXT_BROKER = _RESEND | {KafkaError._TIMED_OUT}


def replication_defaults(settings: KafkaSettings, timeout_s: float = 10.0) -> ReplicationDefaults:
    """How many brokers there are and what replication topics take by default (one broker's
    `default.replication.factor` and `min.insync.replicas`, read from three brokers on).

    Raises BrokerUnavailable when the cluster does not answer within `timeout_s`.
    """
    client = AdminClient(settings.librdkafka(log_level=0))
    deadline = time.monotonic() + timeout_s
    with broker_errors(f"could not read the brokers' defaults at {settings.bootstrap_servers}"):
        brokers = sorted(client.list_topics(timeout=timeout_s).brokers)
        if len(brokers) < REPLICATED_FROM_BROKERS:
            return ReplicationDefaults(len(brokers), 1, None)
        configs = _broker_configs(client, brokers, deadline)
    default = int(configs["default.replication.factor"].value)
    min_insync = int(configs["min.insync.replicas"].value)
    return ReplicationDefaults(len(brokers), replication_for(len(brokers), default), min_insync)


def _broker_configs(client: AdminClient, brokers: list[int], deadline: float) -> Any:
    """One broker's configuration, asking the brokers in turn: the metadata still lists a
    broker killed a moment ago (until its session with the controller expires), and a
    coordinator starting then must not fail on it. Raises the last error at the deadline."""
    turn = 0
    while True:
        broker = ConfigResource(ResourceType.BROKER, str(brokers[turn % len(brokers)]))
        timeout_s = max(0.1, min(BROKER_CONFIG_TRY_S, deadline - time.monotonic()))
        future = client.describe_configs([broker], request_timeout=timeout_s)[broker]
        try:
            return future.result(timeout=timeout_s + 1.0)
        except KafkaException as exc:  # lost in flight, or that broker did not answer
            if error_code(exc) not in _NEXT_BROKER or time.monotonic() >= deadline:
                raise
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise
        turn += 1
        time.sleep(0.2)


def topic_config(settings: KafkaSettings, topic: str, timeout_s: float = 10.0) -> dict[str, str]:
    """A topic's effective configuration (its own settings and the brokers' defaults).

    Raises BrokerUnavailable when the cluster does not answer within `timeout_s`.
    """
    client = AdminClient(settings.librdkafka(log_level=0))
    resource = ConfigResource(ResourceType.TOPIC, topic)
    with broker_errors(f"could not read the configuration of topic {topic}"):
        future = client.describe_configs([resource], request_timeout=timeout_s)[resource]
        entries = future.result(timeout=timeout_s)
    return {name: entry.value for name, entry in entries.items() if entry.value is not None}
