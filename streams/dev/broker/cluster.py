"""A local N-node KRaft cluster for tests of broker faults, from the same jars as one node.

Every node is broker and controller (combined mode) and every node is a voter of one static
`controller.quorum.voters` list, so a majority of nodes must be up for the cluster to elect a
controller. Topics, the offsets topic and the transaction log are replicated `replication`
times and accept writes while `min_insync` replicas are in sync.

Each node can be stopped (SIGTERM: a controlled shutdown), killed (SIGKILL: a crash), paused
(SIGSTOP: a hung JVM that keeps its sockets) and restarted, by node id (1..N).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from streams.dev.broker.jars import JARS_DIR, fetch_jars
from streams.dev.broker.node import LocalBroker, new_cluster_id
from streams.dev.broker.ports import free_port
from streams.errors import BrokerUnavailable
from streams.kafka.admin import ClusterState, cluster_state
from streams.kafka.settings import KafkaSettings

T = TypeVar("T")


@dataclass
class LocalCluster:
    """`size` KRaft nodes on free ports under `home` (one folder per node)."""

    home: Path
    size: int = 3
    replication: int = 0  # 0: min(size, 3)
    min_insync: int = 0  # 0: replication - 1 (2 of 3), at least 1
    # Three nodes of 512 MB fit a 2-core test machine (docs: the guide's "Three Kafka brokers").
    heap_mb: int = 512
    jars_dir: Path = JARS_DIR
    nodes: list[LocalBroker] = field(init=False)

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError("a cluster has at least one node")
        self.replication = self.replication or min(self.size, 3)
        self.min_insync = self.min_insync or max(1, self.replication - 1)
        if not 1 <= self.min_insync <= self.replication <= self.size:
            raise ValueError("need 1 <= min_insync <= replication <= size")
        ports: list[int] = []
        while len(ports) < 2 * self.size:  # two calls of free_port() may return one port
            port = free_port()
            if port not in ports:
                ports.append(port)
        voters = ",".join(f"{i}@127.0.0.1:{ports[2 * i - 1]}" for i in range(1, self.size + 1))
        cluster_id = new_cluster_id()
        self.nodes = [
            LocalBroker(
                self.home / f"node{i}",
                ports[2 * i - 2],
                ports[2 * i - 1],
                self.jars_dir,
                node_id=i,
                voters=voters,
                cluster_id=cluster_id,
                replication=self.replication,
                min_insync=self.min_insync,
                heap_mb=self.heap_mb,
                detach=True,
            )
            for i in range(1, self.size + 1)
        ]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap_servers for n in self.nodes)

    @property
    def settings(self) -> KafkaSettings:
        return KafkaSettings(self.bootstrap_servers)

    def node(self, node_id: int) -> LocalBroker:
        if not 1 <= node_id <= self.size:
            raise ValueError(f"no node {node_id} in a cluster of {self.size}")
        return self.nodes[node_id - 1]

    def start(self, timeout_s: float = 120.0) -> None:
        """Start every node, then wait until all of them are registered brokers."""
        fetch_jars(self.jars_dir)
        try:
            for node in self.nodes:  # all at once: no controller is elected before a majority
                node.launch()
            self.wait_brokers(range(1, self.size + 1), timeout_s)
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout_s: float = 20.0) -> None:
        """Stop every node: SIGTERM to all together, SIGKILL to those left after `timeout_s`.

        All together, as a node's controlled shutdown waits for a controller that a node
        stopped before it may have been.
        """
        for node in self.nodes:
            node.terminate()
        deadline = time.monotonic() + timeout_s
        while any(n.running_pid() for n in self.nodes) and time.monotonic() < deadline:
            time.sleep(0.1)
        for node in self.nodes:
            node.kill()
            node.pid_file.unlink(missing_ok=True)

    def stop_node(self, node_id: int, timeout_s: float = 30.0) -> None:
        """SIGTERM: a controlled shutdown (leaders move away first), SIGKILL after `timeout_s`."""
        self.node(node_id).stop(timeout_s)

    def kill(self, node_id: int) -> None:
        """SIGKILL: the node crashes; its partitions' leaders move once its session ends."""
        self.node(node_id).kill()

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the node hangs with its connections open, until resume()."""
        self.node(node_id).pause()

    def resume(self, node_id: int) -> None:
        self.node(node_id).resume()

    def restart(self, node_id: int, timeout_s: float = 240.0) -> None:
        """Stop the node if it runs, start it again on its data, and wait until it is a
        registered broker again (10-30 s alone, over 2 min on a loaded 2-core machine)."""
        node = self.node(node_id)
        node.stop()
        node.launch()
        self._wait_launched([node], timeout_s)

    def _wait_launched(self, nodes: list[LocalBroker], timeout_s: float) -> None:
        """Wait until each node just launched answers itself, then until all are registered.

        The other nodes' metadata alone is not enough: after a SIGKILL they can list the dead
        node as a broker until its session expires (longer when it was the active controller),
        so a restart that took a minute on a loaded machine looked done at once (a chaos run,
        2026-12-03)."""
        deadline = time.monotonic() + timeout_s
        for node in nodes:
            node.wait_ready(max(1.0, deadline - time.monotonic()))
        ids = [n.node_id for n in nodes]
        self.wait_brokers(ids, max(1.0, deadline - time.monotonic()))

    def heal(self, timeout_s: float = 240.0) -> None:
        """Resume paused nodes, start stopped ones, and wait until all are brokers again."""
        launched = []
        for node in self.nodes:
            if node.running_pid() is None:
                node.launch()
                launched.append(node)
            else:
                node.resume()
        self._wait_launched(launched, timeout_s)
        self.wait_brokers(range(1, self.size + 1), timeout_s)

    def state(self, timeout_s: float = 5.0) -> ClusterState:
        """Brokers, leaders and ISRs now, as the nodes that answer see them."""
        return cluster_state(self.settings, timeout_s)

    def brokers(self) -> frozenset[int]:
        """The ids of the brokers registered (and not fenced) now."""
        return self.state().brokers

    def leader(self, topic: str, partition: int) -> int:
        """The node leading a partition now; -1 while it has none."""
        return self.state().partitions[(topic, partition)].leader

    def isr(self, topic: str, partition: int) -> set[int]:
        """The partition's in-sync replicas now."""
        return set(self.state().partitions[(topic, partition)].isr)

    def under_replicated(self) -> list[tuple[str, int]]:
        """The partitions whose ISR is short of their replicas now (none: the cluster is whole)."""
        return sorted(
            tp for tp, p in self.state().partitions.items() if set(p.isr) != set(p.replicas)
        )

    def wait_full_isr(self, timeout_s: float = 180.0) -> None:
        """Wait until every partition of every topic has all its replicas in sync: what a
        rolling restart waits for before it stops the next node."""
        self.wait_for("every partition's ISR full", lambda: not self.under_replicated(),
                      timeout_s)  # fmt: skip

    def wait_brokers(self, node_ids: Iterable[int], timeout_s: float = 120.0) -> None:
        """Wait until every node of `node_ids` is a registered broker."""
        wanted = set(node_ids)
        for node_id in wanted:
            if self.node(node_id).running_pid() is None:
                raise BrokerUnavailable(
                    f"node {node_id} is not running; log tail:\n" + self.node(node_id).log_tail()
                )
        self.wait_for(f"brokers {sorted(wanted)} registered", lambda: wanted <= self.brokers(),
                      timeout_s)  # fmt: skip

    def wait_isr(
        self, topic: str, partition: int, node_ids: Iterable[int], timeout_s: float = 120.0
    ) -> None:
        """Wait until every node of `node_ids` is in the partition's ISR."""
        wanted = set(node_ids)
        self.wait_for(f"{sorted(wanted)} in the ISR of {topic}[{partition}]",
                      lambda: wanted <= self.isr(topic, partition), timeout_s)  # fmt: skip

    def wait_for(self, what: str, check: Callable[[], T], timeout_s: float) -> T:
        """Poll `check` until it returns something true; BrokerUnavailable after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        last = ""
        while True:
            try:
                found = check()
                if found:
                    return found
            except (BrokerUnavailable, KeyError) as exc:
                last = f" (last: {exc!r})"
            if time.monotonic() >= deadline:
                raise BrokerUnavailable(f"no {what} within {timeout_s:g} s{last}")
            time.sleep(0.5)


def ephemeral_cluster(
    home: Path, size: int = 3, replication: int = 0, min_insync: int = 0
) -> LocalCluster:
    """A cluster of `size` nodes on free ports; 0 for the defaults of replication and ISR."""
    return LocalCluster(home, size, replication, min_insync)
