"""Kafka connection settings: one validated, frozen object that renders each client's config."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
READ_COMMITTED = "read_committed"
# When every broker it knows is down (a one-broker restart), librdkafka 2.16 "re-bootstraps" by
# default: it decommissions those brokers, and a client whose cached coordinator was one of them
# can wedge until it restarts. In the chaos run, after a broker restart, a coordinator blocked in
# send_offsets_to_transaction for 5 minutes, past its 1 s timeout (librdkafka issues 5511 and
# 5456, open), and a consumer stopped heartbeating; tests/kafka/test_broker_restart.py shows the
# hang. With "none" a client keeps reconnecting to the brokers it knows. The cost: if every
# broker changes address while a client is cut off, restart the client to bootstrap again.
METADATA_RECOVERY = "none"

# The consumer group protocol of the clients that join groups (the coordinators' and the
# workers'): TIDEMARK_GROUP_PROTOCOL=classic (the default, every broker version) or consumer
# (KIP-848, Kafka 4: the broker assigns partitions and runs the session timeout). With
# `consumer` librdkafka refuses the client-side `partition.assignment.strategy`,
# `session.timeout.ms` and `heartbeat.interval.ms`: the assignor is named by
# `group.remote.assignor`, and the timeouts are the broker's `group.consumer.*` settings.
GROUP_PROTOCOLS = ("classic", "consumer")


def group_protocol_from_env(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    protocol = env.get("TIDEMARK_GROUP_PROTOCOL") or "classic"
    if protocol not in GROUP_PROTOCOLS:
        raise ValueError(f"TIDEMARK_GROUP_PROTOCOL must be one of {GROUP_PROTOCOLS}: {protocol!r}")
    return protocol


# librdkafka security settings passed through from the environment, e.g.
# KAFKA_SECURITY_PROTOCOL=SASL_SSL, KAFKA_SASL_MECHANISM=PLAIN, KAFKA_SASL_USERNAME=...
_SECURITY_ENV = {
    "KAFKA_SECURITY_PROTOCOL": "security.protocol",
    "KAFKA_SASL_MECHANISM": "sasl.mechanism",
    "KAFKA_SASL_USERNAME": "sasl.username",
    "KAFKA_SASL_PASSWORD": "sasl.password",
    "KAFKA_SSL_CA_LOCATION": "ssl.ca.location",
    "KAFKA_SSL_CERTIFICATE_LOCATION": "ssl.certificate.location",
    "KAFKA_SSL_KEY_LOCATION": "ssl.key.location",
    "KAFKA_SSL_KEY_PASSWORD": "ssl.key.password",
}


@dataclass(frozen=True)
class KafkaSettings:
    """Where the cluster is and how to authenticate; secrets are kept out of repr()."""

    bootstrap_servers: str = DEFAULT_BOOTSTRAP
    security: Mapping[str, str] = field(default_factory=dict, repr=False)
    group_protocol: str = field(default_factory=group_protocol_from_env)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> KafkaSettings:
        env = os.environ if environ is None else environ
        security = {key: env[name] for name, key in _SECURITY_ENV.items() if env.get(name)}
        bootstrap = env.get("KAFKA_BOOTSTRAP_SERVERS") or DEFAULT_BOOTSTRAP
        return cls(bootstrap, security, group_protocol_from_env(env))

    def __post_init__(self) -> None:
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise ValueError(f"group_protocol must be one of {GROUP_PROTOCOLS}")

    def group(
        self, assignor: str, remote_assignor: str, session_timeout_ms: int, heartbeat_ms: int
    ) -> dict[str, Any]:
        """How a subscribing consumer takes part in its group: under `classic` the client-side
        `assignor` and timeouts; under `consumer` (KIP-848) the broker's `remote_assignor`."""
        if self.group_protocol == "consumer":
            return {"group.protocol": "consumer", "group.remote.assignor": remote_assignor}
        return {
            "partition.assignment.strategy": assignor,
            "session.timeout.ms": session_timeout_ms,
            "heartbeat.interval.ms": heartbeat_ms,
        }

    def librdkafka(self, **extra: Any) -> dict[str, Any]:
        """The confluent-kafka (librdkafka) configuration dictionary."""
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "metadata.recovery.strategy": METADATA_RECOVERY,
            **self.security,
            **extra,
        }

    def consumer(self, **extra: Any) -> dict[str, Any]:
        """Consumer config that reads committed records only (``isolation.level=read_committed``).

        The coordinator writes its outputs in Kafka transactions: what it aborts must never
        reach a worker, the CLI or the status page.
        """
        return self.librdkafka(**{"isolation.level": READ_COMMITTED, **extra})

    def producer(self, **extra: Any) -> dict[str, Any]:
        """Producer config whose keys land where aiokafka, Faust and Java clients put them."""
        return self.librdkafka(partitioner="murmur2_random", **extra)
