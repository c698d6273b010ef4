"""How long a coordinator's partitions wait for a new owner, per group protocol (KIP-848).

Two confluent-engine coordinators (6 partitions) share the group; one is stopped (SIGTERM: it
leaves the group) or killed (SIGKILL: the group waits for its session timeout), and this times
how long until the other's /health reports every partition owned, restored and `ok`: the
rebalance pause of a takeover, up to the moment the new owner may commit. Polled every 50 ms.
The victim is then restarted, both are waited for (their partitions disjoint and covering all
six: co-partitioning, checked on every round), and the next round hits the other one.

    TIDEMARK_KAFKA_VERSION=4.3.2 .venv/bin/python bench/takeover_bench.py [--rounds 3]

Under `classic` the session timeout is the client's (10 s, TIDEMARK_SESSION_TIMEOUT_MS);
under `consumer` it is the broker's `group.consumer.session.timeout.ms` (10 s on the local
broker, streams/dev/broker/versions.py; 45 s is Kafka's default).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from common import broker_for_run, coordinator, pct

from streams.dev.broker import KAFKA_VERSION
from streams.kafka.settings import KafkaSettings
from tests.support.coordinator import CoordinatorProcess

PARTITIONS = set(range(6))


def _owned(proc: CoordinatorProcess) -> set[int] | None:
    doc = proc.health()
    if not doc or doc.get("status") != "ok":
        return None
    return set(doc.get("partitions", []))


def _wait_split(a: CoordinatorProcess, b: CoordinatorProcess, timeout_s: float = 120) -> None:
    """Until both run and own disjoint, non-empty sets of partitions covering all six."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pa, pb = _owned(a), _owned(b)
        if pa and pb and not pa & pb and pa | pb == PARTITIONS:
            return
        if pa and pb and pa & pb:
            raise AssertionError(f"both coordinators own {sorted(pa & pb)}: not co-partitioned")
        time.sleep(0.1)
    raise AssertionError(f"no split within {timeout_s} s: {_owned(a)} {_owned(b)}")


def _pause_s(survivor: CoordinatorProcess, began: float, timeout_s: float = 120) -> float:
    while time.monotonic() - began < timeout_s:
        if _owned(survivor) == PARTITIONS:
            return time.monotonic() - began
        time.sleep(0.05)
    raise AssertionError(f"the survivor did not take over within {timeout_s} s")


def run(kafka: KafkaSettings, tmp: Path, protocol: str, rounds: int) -> dict[str, list[float]]:
    prefix = f"bench-takeover-{uuid.uuid4().hex[:6]}"
    procs = []
    for name in ("a", "b"):
        proc = coordinator(kafka, prefix, tmp / f"{protocol}-{name}", "confluent")
        proc.env["TIDEMARK_GROUP_PROTOCOL"] = protocol
        procs.append(proc.start())
    pauses: dict[str, list[float]] = {"stop": [], "kill": []}
    try:
        _wait_split(*procs)
        for i in range(rounds):
            for way in ("stop", "kill"):
                victim, survivor = procs[i % 2], procs[1 - i % 2]
                began = time.monotonic()  # from the signal, not from the victim's exit
                victim.stop() if way == "stop" else victim.kill()
                pauses[way].append(_pause_s(survivor, began))
                victim.start()
                _wait_split(*procs)
    finally:
        for proc in procs:
            proc.kill()
    return pauses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--protocols", default="classic,consumer")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir, broker_for_run(Path(tmp_dir)) as kafka:
        print(f"Kafka {KAFKA_VERSION}, two confluent coordinators, 6 partitions, "
              f"{args.rounds} rounds (each: a stop, then a kill)", flush=True)  # fmt: skip
        for protocol in args.protocols.split(","):
            pauses = run(kafka, Path(tmp_dir), protocol, args.rounds)
            for way, values in pauses.items():
                shown = ", ".join(f"{v:.2f}" for v in values)
                print(f"{protocol:9} {way:5} takeover pause s: p50 {pct(values, 0.5):.2f} "
                      f"max {max(values):.2f}  ({shown})", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
