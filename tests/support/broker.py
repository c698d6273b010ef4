"""The test session's Kafka cluster: an external one, a testcontainers one, or a local JVM broker.

Order of choice: KAFKA_BOOTSTRAP_SERVERS set -> that cluster; else a running Docker daemon ->
a testcontainers Kafka of KAFKA_VERSION; else the local JVM broker from streams.dev.broker on
free ports.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from streams.dev.broker import (
    KAFKA_VERSION,
    LocalBroker,
    SaslSsl,
    ephemeral_broker,
    free_port,
    make_certificates,
)
from streams.kafka.admin import wait_ready
from streams.kafka.settings import KafkaSettings


def _docker_running() -> bool:
    try:
        import docker  # testcontainers' dependency

        docker.from_env(timeout=3).ping()
        return True
    except Exception:
        return False


@contextmanager
def _container() -> Iterator[str]:
    from testcontainers.core.container import DockerContainer

    port, controller = free_port(), free_port()
    env = {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": f"PLAINTEXT://:{port},CONTROLLER://:{controller}",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": f"1@localhost:{controller}",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
    }
    container = DockerContainer(f"apache/kafka:{KAFKA_VERSION}").with_bind_ports(port, port)
    for key, value in env.items():
        container = container.with_env(key, value)
    with container:
        bootstrap = f"127.0.0.1:{port}"
        wait_ready(KafkaSettings(bootstrap), timeout_s=90)
        yield bootstrap


@contextmanager
def kafka_cluster(home: Path) -> Iterator[str]:
    """Yield a bootstrap address for the whole test session; stop what was started."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        wait_ready(KafkaSettings(external), timeout_s=15)
        yield external
    elif _docker_running():
        with _container() as bootstrap:
            yield bootstrap
    else:
        broker = ephemeral_broker(home)
        broker.start()
        try:
            yield broker.bootstrap_servers
        finally:
            broker.stop()


@contextmanager
def sasl_ssl_broker(home: Path) -> Iterator[LocalBroker]:
    """A local JVM broker of its own whose one listener is SASL_SSL (SCRAM-SHA-512), with a CA
    and certificates generated into `home`; stopped on exit. Whatever the session cluster is."""
    broker = ephemeral_broker(home / "broker", SaslSsl(make_certificates(home / "certs")))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
