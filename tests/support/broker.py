"""The test session's Kafka cluster: an external one, a testcontainers one, or a local JVM broker.

Order of choice: KAFKA_BOOTSTRAP_SERVERS set -> that cluster; else TIDEMARK_TEST_KAFKA_IMAGE set
(e.g. apache/kafka:4.3.2, or tidemark/kafka:4.3.2 built by `python -m streams.dev.docker images`)
-> a testcontainers Kafka of that image; else the local JVM broker from streams.dev.broker on
free ports. The image is named, not guessed from a running Docker daemon: a daemon that cannot
pull apache/kafka (no registry, as on CI) would fail the session.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from streams.dev.broker import (
    LocalBroker,
    SaslSsl,
    ephemeral_broker,
    free_port,
    make_certificates,
)
from streams.kafka.admin import wait_ready
from streams.kafka.settings import KafkaSettings


def single_node_env(port: int, controller_port: int) -> dict[str, str]:
    """The official image's variables for one KRaft node, reachable on 127.0.0.1:`port`."""
    return {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": f"PLAINTEXT://:{port},CONTROLLER://:{controller_port}",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": f"1@localhost:{controller_port}",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
        "KAFKA_HEAP_OPTS": "-Xms256m -Xmx512m",
    }


@contextmanager
def kafka_container(image: str) -> Iterator[str]:
    """A single-node Kafka in a container of `image` (apache/kafka's variables), started by
    testcontainers; yields its bootstrap address and stops it on exit.

    testcontainers' reaper (Ryuk) is an image from a registry, off unless
    TESTCONTAINERS_RYUK_DISABLED says otherwise: the context manager stops the container."""
    from testcontainers.core.config import testcontainers_config
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    if "TESTCONTAINERS_RYUK_DISABLED" not in os.environ:
        testcontainers_config.ryuk_disabled = True
    port, controller = free_port(), free_port()
    container = (
        DockerContainer(image, env=single_node_env(port, controller))
        .with_bind_ports(port, port)
        .waiting_for(LogMessageWaitStrategy("Kafka Server started").with_startup_timeout(180))
    )
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
    elif os.environ.get("TIDEMARK_TEST_KAFKA_IMAGE"):
        with kafka_container(os.environ["TIDEMARK_TEST_KAFKA_IMAGE"]) as bootstrap:
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
