"""Every broker gone for longer than the Faust coordinator's commit and session deadlines,
then back: a `tidemark coordinator --engine faust` process and a `tidemark worker` process keep
running, say what they wait for (their /health and a WARNING a minute, not a flood of client
errors), and resume; each stream's `commits` chain has no gap and never goes back (the Faust
engine is at least once: a repeat is allowed, docs/guarantees.md).

The broker is the test's own (SIGKILLed and started on the same ports and data), not the
session's. It is killed while the worker runs a task, with room for one task only: the result
cannot be delivered, so the worker's buffer stays full and it pauses its partitions, then loses
them at its session timeout; librdkafka kept such a pause through the new assignment after the
outage and the worker fetched nothing more (docs/reliability.md "Findings"). About 3 minutes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from streams.dev.broker import ephemeral_broker, free_port
from tests.support.commits import check_chain
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Feed, Tail

# `make test-long`: `make test` keeps the confluent engine's full outage
# (tests/coordinator/test_broker_outage.py).
pytestmark = [pytest.mark.broker, pytest.mark.long]

# Past Faust's session timeout (10 s), its commit interval and aiokafka's request timeout (40 s),
# and past the minute after which each process says again that it still waits.
OUTAGE_S = 70
# 2 streams: an outage of 70 s and a restart of up to 40 s leave 12 windows, about 30 s of work
# for a worker that takes one task at a time (a task, its delivery, the next fetch: 2.5 s).
WINDOW_MS = 20_000
# A task's time in the worker: past the second after which the worker logs it as still running
# (the sign, before the kill, that a task is in its hands), with time left to run after that.
TASK_MS = 1_500


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _health(port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=3) as response:
            doc: dict[str, Any] = json.loads(response.read())
            return doc
    except OSError:
        return None


class Worker:
    def __init__(self, bootstrap: str, prefix: str, log: Path) -> None:
        self.port = free_port()
        self.log = log
        cmd = [sys.executable, "-m", "streams.worker", "--pipeline", "synthetic",
               "--prefix", prefix, "--concurrency", "1", "--buffer", "0", "--grace-s", "1",
               "--port", str(self.port), "--option", f"latency_ms={TASK_MS}"]  # fmt: skip
        env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)  # fmt: skip

    def health(self) -> dict[str, Any] | None:
        return _health(self.port)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _lines(log: Path, pattern: str) -> list[str]:
    text = log.read_text(errors="replace") if log.exists() else ""
    return [line for line in text.splitlines() if re.search(pattern, line)]


def test_a_faust_coordinator_and_a_worker_ride_out_a_full_broker_outage(
    tmp_path: Path, unique: str
) -> None:
    broker = ephemeral_broker(tmp_path / "kafka")
    broker.start()
    kafka = broker.settings
    prefix = f"fo-{unique}"
    coordinator = CoordinatorProcess(
        kafka, prefix, tmp_path / "data", tmp_path / "coordinator.log", engine="faust"
    )
    worker: Worker | None = None
    tail: Tail | None = None
    try:
        coordinator.start().wait_ready(timeout_s=90)
        worker = Worker(kafka.bootstrap_servers, prefix, tmp_path / "worker.log")
        feed = Feed(kafka, prefix)
        streams = [f"s{i}-{unique}" for i in range(2)]
        start_ms = now_ms() // WINDOW_MS * WINDOW_MS - 2 * WINDOW_MS
        for stream_id in streams:
            feed.upsert(stream_id, start_ms, window_ms=WINDOW_MS, step_ms=WINDOW_MS,
                        task_timeout_ms=30_000, bypass_after_ms=3_600_000,
                        retry={"strategy": "fixed", "interval_ms": 1000})  # fmt: skip
        tail = Tail(kafka, prefix, ["commits"], f"t-{unique}")

        def reached(mark_ms: int) -> bool:
            return all(
                any(c["downstream_ms"] >= mark_ms for c in tail.values("commits", s))
                for s in streams
            )

        live_ms = now_ms() - 2 * WINDOW_MS
        tail.wait_for("every stream to go live", lambda: reached(live_ms), timeout_s=60)

        started, deadline = len(_lines(worker.log, "still running")), time.monotonic() + 30
        while len(_lines(worker.log, "still running")) == started:  # a task runs, 0.5 s left
            assert time.monotonic() < deadline, "no task started in 30 s"
            time.sleep(0.02)
        broker.kill()
        stopped_ms = now_ms()
        down_health: tuple[Any, Any] = (None, None)
        while now_ms() - stopped_ms < OUTAGE_S * 1000:
            time.sleep(2)
            assert coordinator.exited() is None, f"coordinator exited:\n{coordinator.tail()}"
            assert worker.proc.poll() is None, f"worker exited:\n{worker.log.read_text()[-3000:]}"
            down_health = (coordinator.health(), worker.health())
        broker.start()
        back_ms = now_ms()

        # What each said while the broker was gone (read just before it came back).
        c_health, w_health = down_health
        assert c_health is not None and c_health["status"] == "waiting_for_brokers", c_health
        assert c_health["kafka_waiting_since_ms"] >= stopped_ms - 1000
        assert w_health is not None and w_health["status"] == "waiting_for_brokers", w_health
        assert w_health["kafka_waiting_since_ms"] >= stopped_ms - 1000
        assert _lines(coordinator.log, r"WARNING.*waiting for the Kafka brokers for [6-9]\d s")
        assert _lines(worker.log, r"WARNING.*waiting for the Kafka brokers for [6-9]\d s")
        # Not a flood: aiokafka logged about 120 lines a second through such an outage.
        flood = r"Unable connect|Unable to update metadata|Failed fetch messages|Group Coordinator"
        aiokafka = _lines(coordinator.log, flood)
        assert len(aiokafka) <= 10, aiokafka[:20]
        # Waiting is not a stall: the worker's consumer is not renewed while no broker answers.
        assert not _lines(worker.log, "stalled, renewing"), worker.log.read_text()[-3000:]

        # Both resume: every stream commits windows that ended after the broker came back.
        tail.wait_for("every stream to resume", lambda: reached(back_ms), timeout_s=100)
        assert coordinator.exited() is None and worker.proc.poll() is None
        # The line that says so comes at each one's next tick after its /health turns ok: on a
        # loaded machine a Faust timer runs seconds late (a run at load 60 saw health ok first).
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if (
                (coordinator.health() or {}).get("status")
                == "ok"
                == (worker.health() or {}).get("status")
                and _lines(coordinator.log, "Kafka brokers answer again after")
                and _lines(worker.log, "Kafka brokers answer again after")
            ):
                break
            time.sleep(0.5)
        assert (coordinator.health() or {}).get("status") == "ok", coordinator.health()
        assert (worker.health() or {}).get("status") == "ok", worker.health()
        assert _lines(coordinator.log, "Kafka brokers answer again after")
        assert _lines(worker.log, "Kafka brokers answer again after")

        tail.drain()
        for stream_id in streams:
            commits = tail.values("commits", stream_id)
            check_chain(commits, exact=False)  # at least once: no gap, never back
            assert commits[0]["previous_ms"] == start_ms
    finally:
        if tail is not None:
            tail.close()
        if worker is not None:
            worker.stop()
        try:
            coordinator.stop(within_s=15)
        finally:
            coordinator.kill()
            broker.stop()
