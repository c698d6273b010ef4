"""Takeover grace on both engines, against a real broker: an ack that waits on `results`
while no coordinator runs, past its deadline, commits as an ack after the restart."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from streams.kafka.settings import KafkaSettings
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Feed, Tail

pytestmark = pytest.mark.broker
# The Faust engine's variants of these run in `make test-long` (tests/conftest.py).
LONG_ON_FAUST = (
    "test_an_ack_waiting_while_the_coordinator_was_down_past_the_deadline_commits_as_ack",
)

WINDOW = 10_000
TIMEOUT_MS = 2_000
BACKLOG = 20_000


@pytest.mark.parametrize("engine", ["confluent", "faust"])
def test_an_ack_waiting_while_the_coordinator_was_down_past_the_deadline_commits_as_ack(
    kafka: KafkaSettings, unique: str, tmp_path: Path, engine: str
) -> None:
    prefix = f"takeover-{unique}"
    stream = f"s-{unique}"
    # A grace long enough for a loaded Faust coordinator to read the backlog (at ~1,000/s).
    proc = CoordinatorProcess(
        kafka, prefix, tmp_path / "c", tmp_path / "c.log", partitions=4, engine=engine,
        env={"TIDEMARK_CATCH_UP_MAX_MS": "60000"},
    )  # fmt: skip
    tail = Tail(kafka, prefix, ["tasks", "commits"], f"tail-{unique}")
    feed = Feed(kafka, prefix)
    now = time.time_ns() // 1_000_000
    start = now - now % WINDOW - WINDOW  # one window, due at once
    proc.start().wait_ready()
    try:
        feed.upsert(stream, start, window_ms=WINDOW, step_ms=WINDOW, max_attempts=1,
                    task_timeout_ms=TIMEOUT_MS, bypass_after_ms=600_000)  # fmt: skip
        (task,) = tail.wait_for("the first task", lambda: tail.values("tasks", stream)[:1])
        proc.kill()  # the task is out, its state committed; no coordinator owns the partition
        # A backlog on `results` ahead of the ack (heartbeats of an attempt never dispatched,
        # ignored as stale), so that the new owner's first ticks come before it reads the ack.
        window = {k: task[k] for k in ("stream_id", "start_ms", "end_ms")}
        stale = {**window, "attempt": task["attempt"] + 1, "outcome": "heartbeat"}
        feed.send_many("results", [stale] * BACKLOG)
        feed.ack(task)  # answered in time, and waiting on `results`
        past = task["deadline_ms"] + 1_000
        while time.time_ns() // 1_000_000 < past:
            time.sleep(0.1)
        proc.start().wait_ready()
        (commit,) = tail.wait_for("the window's commit", lambda: tail.values("commits", stream))
        assert [(w["start_ms"], w["reason"]) for w in commit["windows"]] == [(start, "ack")]
        assert commit["downstream_ms"] == start + WINDOW
    finally:
        tail.close()
        proc.kill()
