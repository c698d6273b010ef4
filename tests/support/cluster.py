"""A local three-node KRaft cluster for the tests of broker faults (streams.dev.broker.cluster).

Only a module that asks for the `kafka_cluster3` fixture starts one: three JVMs take about
1.5 GB and half a minute, so no other test pays for them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka.admin import AdminClient

from streams.dev.broker import LocalCluster, ephemeral_cluster


@contextmanager
def local_cluster(home: Path, size: int = 3) -> Iterator[LocalCluster]:
    """Start a cluster of `size` nodes (replication min(size, 3), min ISR one less); stop it
    and every node of it on exit, whatever the test did to them."""
    cluster = ephemeral_cluster(home, size)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def java_partition(key: str, partitions: int) -> int:
    """The partition Kafka's coordinators pick for a group id or a transactional.id: Java's
    String.hashCode, made positive (Utils.abs), modulo the partitions of `__consumer_offsets`
    or `__transaction_state` (6 each on the local nodes). ASCII keys: one UTF-16 unit each."""
    h = 0
    for char in key:
        h = (31 * h + ord(char)) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return 0 if signed == -(1 << 31) else abs(signed) % partitions


def transaction_coordinator(cluster: LocalCluster, transactional_id: str) -> int:
    """The node hosting `transactional_id`'s transaction coordinator: the leader of its
    `__transaction_state` partition (confluent-kafka 2.16 has no describe_transactions).
    -1 while that partition has no leader."""
    return cluster.leader("__transaction_state", java_partition(transactional_id, 6))


def group_coordinator(cluster: LocalCluster, group: str, timeout_s: float = 60.0) -> int:
    """The node that coordinates `group` now, as describe_consumer_groups says; asked again
    until `timeout_s` while the cluster cannot say (a node just back, a coordinator moving)."""
    admin = AdminClient(cluster.settings.librdkafka(log_level=0))

    def ask() -> int | None:
        (future,) = admin.describe_consumer_groups([group], request_timeout=10).values()
        try:
            return int(future.result(15).coordinator.id)
        except Exception:  # KafkaException, or the future's TimeoutError: asked again
            return None

    return cluster.wait_for(f"the coordinator of group {group}", ask, timeout_s)
