"""Admission end to end on the real broker (issue 29): `tidemark coordinator` processes (the
confluent engine), a source's limits set through `control`, a worker that holds each task a
while, and an auditor that reads `tasks` and `results`.

In flight, as the auditor counts it: a task from its `dispatched_ms` until its result was
produced (the result's record timestamp, the same host's clock). The coordinator counts a
task until it has read the result, later, so its own count is never below this one.
"""

from __future__ import annotations

import heapq
import json
import threading
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer

from streams.kafka.settings import KafkaSettings
from streams.wire.sources import source_control_key
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Feed

pytestmark = pytest.mark.broker

GUARD = {"TIDEMARK_HEALTH_PUBLISH_MS": "200", "TIDEMARK_HEALTH_STALE_MS": "20000"}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class SlowWorker:
    """Answers every task with an ack `hold_ms` after it read it, many at once (a source that
    takes its time, not a worker with one thread)."""

    def __init__(self, kafka: KafkaSettings, prefix: str, group: str, hold_ms: int) -> None:
        self.hold_ms = hold_ms
        self.down = False  # while True, every task is nacked at once (the source is down)
        self._feed = Feed(kafka, prefix)
        self._consumer = Consumer(
            kafka.consumer(**{"group.id": group, "auto.offset.reset": "earliest"})
        )
        self._consumer.subscribe([f"{prefix}.tasks"])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slow-worker", daemon=True)

    def __enter__(self) -> SlowWorker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)
        self._consumer.close()

    def _run(self) -> None:
        held: list[tuple[int, int, dict[str, Any]]] = []
        n = 0
        while not self._stop.is_set():
            for msg in self._consumer.consume(500, 0.02):
                if msg.error() is not None:
                    continue
                task = json.loads(msg.value())
                if self.down:
                    error = {"kind": "no_data", "message": "source down"}
                    self._feed.result(task, "nack", error=error)
                else:
                    n += 1
                    heapq.heappush(held, (now_ms() + self.hold_ms, n, task))
            while held and held[0][0] <= now_ms():
                _, _, done = heapq.heappop(held)
                self._feed.result(done, "ack", ack_ms=done["end_ms"])


class Audit:
    """Every task and result of a prefix, read from the start (`read_committed`)."""

    def __init__(self, kafka: KafkaSettings, prefix: str, group: str) -> None:
        self._consumer = Consumer(
            kafka.consumer(
                **{
                    "group.id": group,
                    "auto.offset.reset": "earliest",
                    "isolation.level": "read_committed",
                }
            )
        )
        self._tasks_topic, self._results_topic = f"{prefix}.tasks", f"{prefix}.results"
        self._consumer.subscribe([self._tasks_topic, self._results_topic])
        self.tasks: dict[str, dict[str, Any]] = {}
        self.answered_ms: dict[str, int] = {}
        self.acked: set[tuple[str, int]] = set()  # (stream, window start) acked

    def poll(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            for msg in self._consumer.consume(1000, 0.2):
                if msg.error() is not None:
                    continue
                value = json.loads(msg.value())
                if msg.topic() == self._tasks_topic:
                    self.tasks[value["task_id"]] = value
                else:
                    task_id = f"{value['stream_id']}/{value['start_ms']}/{value['attempt']}"
                    self.answered_ms.setdefault(task_id, msg.timestamp()[1])
                    if value["outcome"] == "ack":
                        self.acked.add((value["stream_id"], value["start_ms"]))

    def in_flight(self, prefix: str = "") -> list[tuple[int, int]]:
        """(time, tasks in flight from then on), at every dispatch and answer; of the streams
        whose id starts with `prefix` only, if given."""
        events: list[tuple[int, int]] = []
        for task_id, task in self.tasks.items():
            if not task["stream_id"].startswith(prefix):
                continue
            events.append((task["dispatched_ms"], 1))
            answered = self.answered_ms.get(task_id)
            if answered is not None:
                events.append((answered, -1))
        events.sort(key=lambda e: (e[0], e[1]))  # an answer before a dispatch at the same ms
        level, out = 0, []
        for at_ms, delta in events:
            level += delta
            out.append((at_ms, level))
        return out

    def close(self) -> None:
        self._consumer.close()


def set_limits(feed: Feed, source: str, **limits: Any) -> None:
    feed.send("control", {"type": "source_set", "source": source, **limits},
              key=source_control_key(source))  # fmt: skip


@pytest.fixture
def two(kafka: KafkaSettings, unique: str, tmp_path: Path) -> Iterator[list[CoordinatorProcess]]:
    prefix = f"admit-{unique}"
    coordinators = [
        CoordinatorProcess(
            kafka,
            prefix,
            tmp_path / f"data{i}",
            tmp_path / f"log{i}",
            partitions=4,
            engine="confluent",
            env=GUARD,
        )
        for i in range(2)
    ]
    for c in coordinators:
        c.start()
    try:
        yield coordinators
    finally:
        for c in coordinators:
            if c.exited() is None:
                c.stop()


def test_a_cap_holds_across_two_coordinators_and_through_a_rebalance(
    kafka: KafkaSettings, unique: str, two: list[CoordinatorProcess]
) -> None:
    """300 streams of S, each a minute behind in 1 s windows, S capped at 20, a worker that
    holds each task 300 ms, two coordinators, then one of them stops and its partitions move.

    The bound (streams.core.admission.share): the shares add up to at most 20; in flight
    exceeds them only by tasks sent under a share that a later view cut, until answered. Here
    demand shifts between partitions all the time (windows finish, the next ones come due), so
    small cuts happen in the steady state too: in flight may pass 20 by a few tasks for a few
    hundred ms (21 was seen at load average 4). What is asserted: never above 2 x 20 while both
    run, nor above 3 x 20 around the move; above 20 for at most 5 % of the time; and back
    within 20 (plus a cut's few tasks) once the move is done."""
    prefix = f"admit-{unique}"
    a, b = two
    a.wait_ready(partitions=2)
    b.wait_ready(partitions=2)
    feed = Feed(kafka, prefix)
    set_limits(feed, "S", max_in_flight=20)
    time.sleep(2)  # the coordinators read the `sources` view
    audit = Audit(kafka, prefix, f"audit-{unique}")
    start_ms = now_ms() - now_ms() % 1000 - 60_000
    try:
        with SlowWorker(kafka, prefix, f"w-{unique}", hold_ms=300):
            for i in range(300):
                feed.upsert(f"s{i}-{unique}", start_ms, window_ms=1000, step_ms=1000,
                            source="S", max_in_flight=5, task_timeout_ms=30_000)  # fmt: skip
            audit.poll(20)
            steady = audit.in_flight()
            b.stop()  # its partitions move to `a`
            moved_ms = now_ms()
            audit.poll(12)
            after = audit.in_flight()
    finally:
        audit.close()
    answered = len(audit.answered_ms)
    first_ms = steady[0][0]
    over_steady = time_above(steady, 20, first_ms, moved_ms)
    moving = [(t, n) for t, n in after if t >= moved_ms]
    print(f"\n{len(audit.tasks)} tasks, {answered} answered; most in flight: steady "
          f"{max(n for _, n in steady)} (above 20 for {over_steady:.1%} of the time), around "
          f"the move {max(n for _, n in moving)}")  # fmt: skip
    assert answered >= 400  # about 20 / 0.3 s = 66 a second at the cap, for 30 s
    assert max(n for _, n in steady) <= 40
    assert over_steady <= 0.05
    assert max(n for _, n in moving) <= 60
    settled = [n for t, n in after if t >= moved_ms + 6_000]
    assert settled and max(settled) <= 23


def mean_level(levels: list[tuple[int, int]], since_ms: int, until_ms: int) -> float:
    """The time-weighted mean of `levels` (time, level from then) over [since_ms, until_ms)."""
    total = 0
    for (at_ms, level), (next_ms, _) in pairwise([*levels, (until_ms, 0)]):
        start, end = max(at_ms, since_ms), min(next_ms, until_ms)
        if end > start:
            total += level * (end - start)
    return total / max(1, until_ms - since_ms)


def time_above(levels: list[tuple[int, int]], cap: int, since_ms: int, until_ms: int) -> float:
    """The part of [since_ms, until_ms) during which `levels` (time, level from then) exceeds
    `cap`."""
    above_ms = 0
    for (at_ms, level), (next_ms, _) in pairwise(levels):
        start, end = max(at_ms, since_ms), min(next_ms, until_ms)
        if level > cap and end > start:
            above_ms += end - start
    return above_ms / max(1, until_ms - since_ms)


WARM_MS = 8_000
CAP = 100


def test_live_windows_keep_their_pace_while_a_day_of_backfill_keeps_its_floor(
    kafka: KafkaSettings, unique: str, tmp_path: Path
) -> None:
    """100 live streams of 1 s windows and 50 streams a day behind (1 min windows, 3 in flight
    each) on one source capped at 100, backfill_share 0.2 (20 slots), a worker that holds each
    task 100 ms: the 100 live windows come due together each second, and the backfill alone
    would take every slot (150 wanted). Once the first views have granted the coordinator its
    share, every live window goes out within a second of its end (the 80 slots left to them
    take 100 in one or two rounds of a task's 100 ms and its way back, which a loaded machine
    stretches to about 600 ms), and the backfill keeps its floor: 20 in flight on average at
    least. (A cap of 30 left live windows 24 slots: at load a round trip took 640 ms, live
    demand outgrew its slots, and windows waited for good.)"""
    prefix = f"live-{unique}"
    coordinator = CoordinatorProcess(kafka, prefix, tmp_path / "data", tmp_path / "log",
                                     partitions=4, engine="confluent", env=GUARD)  # fmt: skip
    coordinator.start().wait_ready()
    feed = Feed(kafka, prefix)
    set_limits(feed, "S", max_in_flight=CAP, backfill_share=0.2)
    time.sleep(2)
    audit = Audit(kafka, prefix, f"audit-{unique}")
    now = now_ms()
    live_start = now - now % 1000
    try:
        with SlowWorker(kafka, prefix, f"w-{unique}", hold_ms=100):
            for i in range(50):
                feed.upsert(f"old{i}-{unique}", live_start - 86_400_000, window_ms=60_000,
                            step_ms=1000, source="S", max_in_flight=3)  # fmt: skip
            for i in range(100):
                feed.upsert(f"live{i}-{unique}", live_start, window_ms=1000, step_ms=1000,
                            source="S")  # fmt: skip
            # At least 20 s of live windows past the warm-up, however long the upserts took (a
            # loaded machine took seconds for them: a fixed 30 s from the start audited 9 s).
            audit.poll(max(30.0, (live_start + WARM_MS + 22_000 - now_ms()) / 1000))
            audited_ms = now_ms()
    finally:
        audit.close()
        coordinator.stop()
    warm_ms = live_start + WARM_MS  # a start: the share takes two views, the rebuild is paced
    until_ms = audited_ms - 2_000  # windows that ended by then had a second to go out
    delays = sorted(
        t["dispatched_ms"] - t["end_ms"]
        for t in audit.tasks.values()
        if t["stream_id"].startswith("live") and warm_ms <= t["end_ms"] <= until_ms
        and t["attempt"] == 1
    )  # fmt: skip
    backfill = mean_level(audit.in_flight("old"), warm_ms, until_ms)
    p99 = delays[int(len(delays) * 0.99)] if delays else None
    floor = 0.2 * CAP
    print(f"\n{len(delays)} live windows after the warm-up, dispatch delay p50 "
          f"{delays[len(delays) // 2] if delays else None} ms, p99 {p99} ms, max "
          f"{delays[-1] if delays else None} ms; backfill in flight {backfill:.1f} on average "
          f"over {(until_ms - warm_ms) / 1000:.1f} s (floor: {floor:.0f})")  # fmt: skip
    # Every live window that ended in the audited span went out: 100 streams, one a second.
    assert until_ms - warm_ms >= 20_000
    assert len(delays) >= 100 * (until_ms - warm_ms) // 1000
    assert p99 is not None and p99 <= 1000
    assert backfill >= 0.8 * floor


def test_a_source_that_leaves_outage_gets_its_held_windows_by_a_slow_start(
    kafka: KafkaSettings, unique: str, tmp_path: Path
) -> None:
    """300 streams of S fail together (an outage: each one's bypass is held from its second
    failure, its budget being 2 s), retrying every 3 to 30 s (jitter spreads them); S comes
    back and holds each task 500 ms. Once the guard sees it recover (more than 10 % of its
    streams acked: TIDEMARK_OUTAGE_RATIO 0.9), the held windows waiting for their retry go
    out by a slow start: 4 at first, one more per answer, not all at once; and every window
    commits as an ack."""
    prefix = f"pace-{unique}"
    log = tmp_path / "log"
    env = {**GUARD, "TIDEMARK_OUTAGE_RATIO": "0.9"}
    coordinator = CoordinatorProcess(kafka, prefix, tmp_path / "data", log, partitions=4,
                                     engine="confluent", env=env)  # fmt: skip
    coordinator.start().wait_ready()
    feed = Feed(kafka, prefix)
    audit = Audit(kafka, prefix, f"audit-{unique}")
    start_ms = now_ms() - now_ms() % 60_000 - 60_000  # one window due at once
    retry = {"strategy": "exponential", "initial_ms": 30_000, "multiplier": 1,
             "max_ms": 30_000, "jitter": 0.9}  # fmt: skip
    streams = [f"s{i}-{unique}" for i in range(300)]
    try:
        with SlowWorker(kafka, prefix, f"w-{unique}", hold_ms=500) as worker:
            worker.down = True
            for stream_id in streams:
                feed.upsert(stream_id, start_ms, window_ms=60_000, step_ms=15_000, source="S",
                            bypass_after_ms=2000, retry=retry, task_timeout_ms=30_000)  # fmt: skip
            audit.poll(20)  # most streams held by now, their next retries seconds away
            worker.down = False
            paced_ms = None
            deadline = time.monotonic() + 60
            while paced_ms is None and time.monotonic() < deadline:
                audit.poll(0.1)
                if "pacing the release" in log.read_text(errors="replace"):
                    paced_ms = now_ms()
            assert paced_ms is not None, coordinator.tail()

            def committed() -> set[str]:
                return {stream for stream, start in audit.acked if start == start_ms}

            deadline = time.monotonic() + 60
            while len(committed()) < len(streams) and time.monotonic() < deadline:
                audit.poll(0.5)
    finally:
        audit.close()
        coordinator.stop()
    began_ms = paced_ms - 300  # the log line is read up to 100 ms late, plus its flush
    per_s = [
        sum(1 for t in audit.tasks.values() if began_ms + k * 1000 <= t["dispatched_ms"]
            < began_ms + (k + 1) * 1000)
        for k in range(8)
    ]  # fmt: skip
    print(f"\ntasks a second from the pacing's start: {per_s}")
    assert len(committed()) == len(streams)
    # 4 at once, each answered after 500 ms: about 4 + 8 in the first second (and a few for
    # answers read early); without pacing, every held window waiting for its retry at once
    assert per_s[0] <= 24, per_s
    assert max(per_s) > 2 * per_s[0], per_s  # it grew
    assert sum(per_s) >= 100, per_s  # the held windows went out
