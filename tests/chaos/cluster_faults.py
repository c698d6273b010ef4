"""The broker faults of the chaos run's cluster mode (`make chaos CHAOS_BROKERS=3`, issue 26).

On a LocalCluster of 3 nodes (replication 3, min ISR 2), one after another, each from a whole
cluster (every partition's ISR full) and each logged with its window:

1. `results-leader-kill`: SIGKILL of the leader of a `results` partition, restarted ~20 s later;
2. `txn-coordinator-kill`: SIGKILL of the node hosting a coordinator's transaction coordinator:
   the leader of the `__transaction_state` partition of its transactional.id (Java's hashCode
   modulo the 6 partitions, as Kafka picks it; confluent-kafka 2.16 has no
   describe_transactions), restarted ~20 s later;
3. `group-coordinator-kill`: SIGKILL of the coordinators' consumer group's coordinator, as
   describe_consumer_groups names it, restarted ~20 s later;
4. `rolling-restart`: each node stopped (SIGTERM, a controlled shutdown) and started in turn,
   the next one only once every ISR is full again;
5. `two-down`: two nodes SIGKILLed together, past min.insync.replicas (and the controller
   quorum) for `TWO_DOWN_S`, then both started again.

The run's single broker restart becomes a `node-restart` of a random node (`node_restart`).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from streams.dev.broker import LocalCluster
from tests.support.cluster import group_coordinator, transaction_coordinator

from .exit_audit import Fault

DOWN_S = 20.0  # a killed node's time down
TWO_DOWN_S = 40.0  # two nodes down together: past a 10 s transaction timeout, several times
BETWEEN_S = 10.0  # the run at peace between two faults
# A node's restart and its ISRs: a JVM relaunched on a loaded 2-core machine took over 120 s to
# answer in a cluster-mode run (three JVMs, two coordinators, two workers and the run).
ISR_WAIT_S = 240.0
RESTART_S = 240.0

Begin = Callable[[str, str], Fault]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ClusterFaults:
    def __init__(
        self,
        cluster: LocalCluster,
        results: str,
        transactional_ids: list[str],
        group: str,
        begin: Begin,
        say: Callable[[str], None],
        rng: random.Random,
        halt: threading.Event,
    ) -> None:
        self.cluster = cluster
        self.results = results  # the full topic name
        self.transactional_ids = transactional_ids  # empty: no transactions (the faust engine)
        self.group = group
        self.begin = begin
        self.say = say
        self.rng = rng
        self.halt = halt
        self.errors: list[str] = []
        # Held while a fault is under way: the run's node restart waits for it, and the other way.
        self.lock = threading.Lock()

    def run(self) -> None:
        """Every fault in turn; an exception is kept as an error (the run fails on it: a fault
        it cannot say it made is a fault it did not audit)."""
        steps: list[tuple[str, Callable[[], None]]] = [
            ("results-leader-kill", self.results_leader_kill),
            ("txn-coordinator-kill", self.txn_coordinator_kill),
            ("group-coordinator-kill", self.group_coordinator_kill),
            ("rolling-restart", self.rolling_restart),
            ("two-down", self.two_down),
        ]
        for name, step in steps:
            if self.halt.wait(BETWEEN_S):
                self.errors.append(f"cluster faults: halted before {name}")
                return
            try:
                with self.lock:
                    self.cluster.wait_full_isr(ISR_WAIT_S)
                    step()
            except Exception as exc:
                self.errors.append(f"cluster faults: {name}: {type(exc).__name__}: {exc}")
                self.say(f"cluster fault {name} failed: {type(exc).__name__}: {exc}")
                time.sleep(5)  # a node just given up on frees its ports
                try:
                    self.cluster.heal(RESTART_S)
                except Exception as again:  # the next step says it again
                    self.say(f"heal after {name}: {again}")

    # -- the faults --------------------------------------------------------------------------

    def _kill_and_restart(self, kind: str, node: int, why: str) -> None:
        if node not in range(1, self.cluster.size + 1):
            raise RuntimeError(f"no node to kill for {kind}: {why} is {node}")
        fault = self.begin(kind, f"SIGKILL of node {node}, {why}; restarted after {DOWN_S:g} s")
        self.cluster.kill(node)
        time.sleep(DOWN_S)
        self.cluster.restart(node, RESTART_S)
        self.cluster.wait_full_isr(ISR_WAIT_S)
        fault.end_ms = _now_ms()

    def results_leader_kill(self) -> None:
        partitions = sorted(p for (t, p) in self.cluster.state().partitions if t == self.results)
        partition = self.rng.choice(partitions)
        leader = self.cluster.leader(self.results, partition)
        self._kill_and_restart(
            "results-leader-kill", leader, f"the leader of {self.results}[{partition}]"
        )

    def txn_coordinator_kill(self) -> None:
        if not self.transactional_ids:
            self.say("txn-coordinator-kill: no transactional.id (faust engine), skipped")
            return
        tid = self.rng.choice(self.transactional_ids)
        node = transaction_coordinator(self.cluster, tid)
        self._kill_and_restart("txn-coordinator-kill", node, f"transaction coordinator of {tid}")

    def group_coordinator_kill(self) -> None:
        node = group_coordinator(self.cluster, self.group)
        self._kill_and_restart("group-coordinator-kill", node, f"group coordinator of {self.group}")

    def rolling_restart(self) -> None:
        fault = self.begin("rolling-restart", "each node stopped and started in turn")
        for node in range(1, self.cluster.size + 1):
            began = time.monotonic()
            self.cluster.restart(node, RESTART_S)  # SIGTERM: a controlled shutdown, then start
            self.cluster.wait_full_isr(ISR_WAIT_S)
            took_s = time.monotonic() - began
            self.say(f"rolling restart: node {node} back and every ISR full after {took_s:.0f} s")
        fault.end_ms = _now_ms()

    def two_down(self) -> None:
        nodes = sorted(self.rng.sample(range(1, self.cluster.size + 1), 2))
        fault = self.begin(
            "two-down", f"SIGKILL of nodes {nodes} together, back after {TWO_DOWN_S:g} s"
        )
        for node in nodes:
            self.cluster.kill(node)
        time.sleep(TWO_DOWN_S)
        self.cluster.heal(RESTART_S)  # starts both, waits until all three are brokers
        self.cluster.wait_full_isr(ISR_WAIT_S)
        fault.end_ms = _now_ms()

    def node_restart(self) -> None:
        """The single broker's restart of the one-broker run, on a random node."""
        with self.lock:
            node = self.rng.randrange(1, self.cluster.size + 1)
            fault = self.begin("node-restart", f"node {node} stopped, then started on its data")
            self.cluster.restart(node, RESTART_S)
            fault.end_ms = _now_ms()
