"""Exactly once on `commits` through broker faults of a three-node cluster, and no process exit
(issue 26, "Tests and figures"): a `tidemark coordinator` (default engine) and a synthetic
worker under load, the leader of a `results` partition SIGKILLed and restarted, then a rolling
restart of the three nodes. Every stream's commits form one chain (no gap, no repeat, no
regression) and neither process exits: a supervisor is not part of the promise.

The `results` partition is one whose leader also hosts the coordinator's transaction
coordinator when there is one (with 3 partitions on 3 nodes there usually is): the kill then
takes the transaction coordinator away too, the fault that ended the coordinator in issue 26's
runs. The faults are timed on stdout (`-s`).
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from streams.coordinator.settings import default_instance
from streams.dev.broker import LocalCluster
from streams.topics import Topics
from tests.chaos.processes import Worker
from tests.support.cluster import transaction_coordinator
from tests.support.commits import check_exactly_once
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Feed, Tail

pytestmark = [pytest.mark.broker, pytest.mark.cluster]

STREAMS = 24
WINDOW_MS = 1000
DOWN_S = 20.0  # the killed leader's time down: past the 10 s transaction timeout, as in issue 26
ISR_WAIT_S = 240.0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Processes:
    """The coordinator and the worker; `check()` fails the test as soon as either has exited."""

    def __init__(self, coordinator: CoordinatorProcess, worker: Worker) -> None:
        self.coordinator, self.worker = coordinator, worker

    def check(self, when: str) -> None:
        for name, status, log in (
            ("coordinator", self.coordinator.exited(), self.coordinator.log),
            ("worker", self.worker.exited(), self.worker.log),
        ):
            if status is not None:
                tail = log.read_text(errors="replace")[-4000:]
                pytest.fail(f"the {name} exited with status {status} {when}; its log:\n{tail}")


def say(began: float, message: str) -> None:
    print(f"[{time.monotonic() - began:5.1f} s] {message}", flush=True)


def victim(cluster: LocalCluster, prefix: str, data: Path) -> tuple[int, int, str]:
    """(partition of results, its leader, why): a leader that is also the transaction
    coordinator of the coordinator's transactional.id if one is."""
    topics = Topics(prefix)
    tid = f"{topics.eos_group}-{default_instance(data)}"
    txn_node = transaction_coordinator(cluster, tid)
    state = cluster.state().partitions
    leaders = {p: s.leader for (t, p), s in state.items() if t == topics.results}
    for partition, leader in sorted(leaders.items()):
        if leader == txn_node:
            return partition, leader, f"also the transaction coordinator of {tid}"
    return 0, leaders[0], f"not the transaction coordinator of {tid} (node {txn_node})"


def marks(tail: Tail) -> dict[str, int]:
    out: dict[str, int] = {}
    for commit in tail.values("commits"):
        out[commit["stream_id"]] = max(out.get(commit["stream_id"], 0), commit["downstream_ms"])
    return out


def test_exactly_once_and_no_exit_through_a_leader_kill_and_a_rolling_restart(
    kafka_cluster3: LocalCluster, unique: str, tmp_path: Path
) -> None:
    cluster, prefix, began = kafka_cluster3, f"clustereos-{unique}", time.monotonic()
    coordinator = CoordinatorProcess(
        cluster.settings, prefix, tmp_path / "data", tmp_path / "coordinator.log"
    )
    worker = Worker(cluster.settings, prefix, tmp_path / "worker.log", "worker")
    procs = Processes(coordinator, worker)
    tail: Tail | None = None
    try:
        coordinator.start().wait_ready(timeout_s=90)  # it creates the topics (replication 3)
        worker.start()
        feed = Feed(cluster.settings, prefix)
        start_ms = now_ms() // WINDOW_MS * WINDOW_MS - 20_000  # a backlog, then live
        stream_ids = [f"s{i:02d}-{unique}" for i in range(STREAMS)]
        config: dict[str, Any] = {
            "window_ms": WINDOW_MS, "step_ms": WINDOW_MS, "task_timeout_ms": 10_000,
            "bypass_after_ms": 120_000, "max_in_flight": 4,
            "retry": {"strategy": "fixed", "interval_ms": 300},
        }  # fmt: skip
        feed.send_many(
            "control",
            [{"type": "upsert", "stream_id": s, "start_ms": start_ms, **config}
             for s in stream_ids],
        )  # fmt: skip
        tail = Tail(cluster.settings, prefix, ["commits"], f"clustereos-{unique}-tail")

        def caught_up(target_ms: int, when: str) -> bool:
            procs.check(when)
            found = marks(tail) if tail else {}
            return all(found.get(s, 0) >= target_ms - WINDOW_MS for s in stream_ids)

        tail.wait_for("every stream live", lambda: caught_up(now_ms() - 3000, "at start"), 90)
        say(began, "every stream live")

        partition, leader, why = victim(cluster, prefix, tmp_path / "data")
        cluster.kill(leader)
        say(began, f"killed node {leader}, the leader of results[{partition}], {why}")
        time.sleep(DOWN_S)
        procs.check(f"with node {leader}, the leader of results[{partition}], killed")
        cluster.restart(leader)
        cluster.wait_full_isr(ISR_WAIT_S)
        say(began, f"node {leader} back, every ISR full")
        procs.check(f"once node {leader} was back")
        tail.poll()

        for node in range(1, cluster.size + 1):  # the rolling restart
            cluster.restart(node)  # SIGTERM: a controlled shutdown, then start
            cluster.wait_full_isr(ISR_WAIT_S)
            say(began, f"rolling restart: node {node} back, every ISR full")
            procs.check(f"in the rolling restart, node {node} restarted")
            tail.poll()

        faults_end_ms = now_ms()
        tail.wait_for(
            "every stream caught up after the faults",
            lambda: caught_up(faults_end_ms, "after the faults"),
            timeout_s=90,
        )
        procs.check("at the end")
        say(began, "every stream caught up")
        by_stream: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for commit in tail.values("commits"):
            by_stream[commit["stream_id"]].append(commit)
        assert sorted(by_stream) == sorted(stream_ids)
        for sid in stream_ids:
            check_exactly_once(by_stream[sid], start_ms)  # no gap, repeat or regression
    finally:
        if tail is not None:
            tail.close()
        worker.stop()
        coordinator.kill()
