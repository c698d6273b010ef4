"""The outage guard end to end on the real broker, on both engines: `tidemark coordinator`
processes, the `health` topic between them, a stand-in worker.

Durations are short: a bypass 3 s after the first failure, retries every 500 ms, counts
published every 200 ms. Four streams on source S fail together (an outage: their bypasses are
held); one stream on source R fails alone (bypassed on time).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from streams.coordinator.processor import partition_of
from streams.coordinator.settings import default_instance
from streams.kafka.settings import KafkaSettings
from streams.outages import HealthReader
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Feed, Responder, Tail

pytestmark = pytest.mark.broker

ENGINES = ("confluent", "faust")
FAST = {
    "bypass_after_ms": 3000,
    "retry": {"strategy": "fixed", "interval_ms": 500},
    "task_timeout_ms": 2000,
}
GUARD = {"TIDEMARK_HEALTH_PUBLISH_MS": "200", "TIDEMARK_HEALTH_STALE_MS": "20000"}
WINDOW = 60_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Source:
    """Whether each source answers: the worker acks a stream whose source is up, else nacks."""

    def __init__(self, down: set[str]) -> None:
        self.down = set(down)
        self.lock = threading.Lock()

    def policy(self, sources: dict[str, str]) -> Any:
        def answer(task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
            with self.lock:
                failing = sources[task["stream_id"]] in self.down
            if failing:
                return "nack", {"error": {"kind": "no_data", "message": "source down"}}
            return "ack", {"ack_ms": task["end_ms"]}

        return answer

    def recover(self, source: str) -> None:
        with self.lock:
            self.down.discard(source)


def create(feed: Feed, streams: dict[str, str], start_ms: int) -> None:
    for stream_id, source in streams.items():
        feed.upsert(stream_id, start_ms, window_ms=WINDOW, step_ms=15_000, source=source, **FAST)


def bypassed(tail: Tail, stream_ids: list[str]) -> list[dict[str, Any]]:
    return [b for s in stream_ids for b in tail.values("bypassed", s)]


def first_failure_ms(tail: Tail, stream_id: str) -> int:
    return min(t["dispatched_ms"] for t in tail.values("tasks", stream_id))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_shared_outage_holds_bypasses_a_lone_failure_does_not_and_recovery_commits(
    kafka: KafkaSettings, unique: str, tmp_path: Path, engine: str
) -> None:
    prefix = f"outage-{unique}"
    s_streams = [f"s{i}-{unique}" for i in range(4)]
    r_stream = f"r-{unique}"
    sources = {**dict.fromkeys(s_streams, "S"), r_stream: "R"}
    coordinator = CoordinatorProcess(
        kafka, prefix, tmp_path / "data", tmp_path / "log", engine=engine, env=GUARD
    )
    coordinator.start().wait_ready()
    feed = Feed(kafka, prefix)
    tail = Tail(kafka, prefix, ["tasks", "commits", "bypassed"], f"t-{unique}")
    source = Source({"S", "R"})
    start = now_ms() - now_ms() % WINDOW - WINDOW  # one window due at once
    try:
        with Responder(kafka, prefix, f"w-{unique}", source.policy(sources)):
            create(feed, sources, start)
            record = tail.wait_for("R's bypass", lambda: tail.values("bypassed", r_stream))[0]
            assert 3000 <= record["bypassed_ms"] - record["first_failed_ms"] < 6000  # on time
            s_failed_ms = max(first_failure_ms(tail, s) for s in s_streams)
            while now_ms() < s_failed_ms + 3 * FAST["bypass_after_ms"]:  # three budgets
                tail.poll()
            assert bypassed(tail, s_streams) == [], "a bypass of the outage's streams"
            attempts = {s: max(t["attempt"] for t in tail.values("tasks", s)) for s in s_streams}
            assert min(attempts.values()) >= 6, attempts  # they kept retrying

            source.recover("S")
            recovered_ms = now_ms()

            def acked_after_hold() -> list[dict[str, Any]]:
                first = [
                    w
                    for s in s_streams
                    for c in tail.values("commits", s)
                    for w in c["windows"]
                    if w["start_ms"] == start
                ]
                return first if len(first) == len(s_streams) else []

            windows = tail.wait_for("the held windows to commit", acked_after_hold)
            assert {w["reason"] for w in windows} == {"ack"}
            for w in windows:
                assert 0 < w["held_ms"] <= recovered_ms - s_failed_ms + 2000, w
            tail.drain()
            assert bypassed(tail, s_streams) == []
    finally:
        tail.close()
        coordinator.stop()


@pytest.mark.parametrize("engine", ENGINES)
def test_after_outage_max_hold_ms_bypasses_resume(
    kafka: KafkaSettings, unique: str, tmp_path: Path, engine: str
) -> None:
    prefix = f"hold-{unique}"
    s_streams = [f"s{i}-{unique}" for i in range(4)]
    coordinator = CoordinatorProcess(
        kafka,
        prefix,
        tmp_path / "data",
        tmp_path / "log",
        engine=engine,
        env={**GUARD, "TIDEMARK_OUTAGE_MAX_HOLD_MS": "3000"},
    )
    coordinator.start().wait_ready()
    feed = Feed(kafka, prefix)
    tail = Tail(kafka, prefix, ["tasks", "bypassed"], f"t-{unique}")
    start = now_ms() - now_ms() % WINDOW - WINDOW
    try:
        with Responder(kafka, prefix, f"w-{unique}", Source({"S"}).policy(
            dict.fromkeys(s_streams, "S"))):  # fmt: skip
            create(feed, dict.fromkeys(s_streams, "S"), start)
            records = tail.wait_for(
                "every stream bypassed after its hold",
                lambda: (found := bypassed(tail, s_streams)) and len(found) >= 4 and found,
            )
            for record in records[:4]:
                held_for_ms = record["bypassed_ms"] - record["first_failed_ms"]
                # the budget (3 s), then the hold (3 s): not before, and not much later
                assert 6000 <= held_for_ms < 10_000, record
    finally:
        tail.close()
        coordinator.stop()


@pytest.mark.parametrize("engine", ENGINES)
def test_the_view_crosses_coordinators_and_the_hold_survives_a_sigkill(
    kafka: KafkaSettings, unique: str, tmp_path: Path, engine: str
) -> None:
    prefix = f"pair-{unique}"
    # Five failing streams make an outage: each coordinator owns three, so only the counts it
    # reads from the other one can make it hold. A dead coordinator's counts must outlast the
    # takeover (a session, and with the confluent engine its open transaction's timeout).
    env = {
        **GUARD,
        "TIDEMARK_OUTAGE_MIN_STREAMS": "5",
        "TIDEMARK_SESSION_TIMEOUT_MS": "6000",
        "TIDEMARK_HEALTH_STALE_MS": "25000",
    }
    a, b = (
        CoordinatorProcess(
            kafka, prefix, tmp_path / n, tmp_path / f"{n}.log", 4, engine=engine, env=env
        )
        for n in "ab"
    )
    a.start().wait_ready(partitions=4)
    b.start()
    tail = Tail(kafka, prefix, ["tasks", "bypassed"], f"t-{unique}")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ha, hb = a.health(), b.health()
            owned = sorted((ha or {}).get("partitions", []) + (hb or {}).get("partitions", []))
            if ha and hb and ha["partitions"] and hb["partitions"] and owned == [0, 1, 2, 3]:
                break
            time.sleep(0.3)
        else:
            raise AssertionError(f"no split: {a.health()} {b.health()}")
        on_a = set(ha["partitions"])
        mine: list[str] = []
        theirs: list[str] = []
        for i in range(1000):
            stream_id = f"s{i}-{unique}"
            group = mine if partition_of(stream_id.encode(), 4) in on_a else theirs
            if len(group) < 3:
                group.append(stream_id)
            if len(mine) == len(theirs) == 3:
                break
        failing = sorted(mine + theirs)
        feed = Feed(kafka, prefix)
        start = now_ms() - now_ms() % WINDOW - WINDOW
        with Responder(kafka, prefix, f"w-{unique}", Source({"S"}).policy(
            dict.fromkeys(failing, "S"))):  # fmt: skip
            create(feed, dict.fromkeys(failing, "S"), start)
            first_ms = tail.wait_for(
                "every stream's first attempt",
                lambda: (
                    all(tail.values("tasks", s) for s in failing)
                    and max(first_failure_ms(tail, s) for s in failing)
                ),
            )
            while now_ms() < first_ms + 3 * FAST["bypass_after_ms"]:
                tail.poll()
            assert bypassed(tail, failing) == [], "the view did not cross the processes"
            b.kill()  # SIGKILL during the outage: its last counts stay on `health` meanwhile
            killed_ms = now_ms()
            a.wait_ready(partitions=4, timeout_s=60)
            while now_ms() < killed_ms + 20_000:  # the takeover, and more
                tail.poll()
            assert bypassed(tail, failing) == [], "the hold did not survive the kill"
            reader = HealthReader(kafka, f"{prefix}.health")
            try:
                entries = reader.refresh(10)
            finally:
                reader.close()
            # The survivor now publishes every partition: the dead one's counts are gone.
            assert {e.partition for e in entries} == {0, 1, 2, 3}
            assert {e.owner for e in entries} == {default_instance(tmp_path / "a")}
            assert sum(e.sources["S"].failing for e in entries if "S" in e.sources) == 6
    finally:
        tail.close()
        b.kill()
        a.stop()
