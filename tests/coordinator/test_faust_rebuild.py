"""The Faust engine's rebuild a slice at a time (`Ownership.building`), against a real broker:
a restart over more streams than one slice, with inputs arriving while it runs, indexes them
all and keeps serving (the awaits between slices let Faust's own take-buffer task run in the
middle of a batch: it once found the stream's current event gone and crashed the agent)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from streams.coordinator.ownership import BUILD_SLICE
from streams.kafka.settings import KafkaSettings
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Tail

# `make test-long`: the Faust engine's long scenarios run there (tests/conftest.py).
pytestmark = [pytest.mark.broker, pytest.mark.long]

STREAMS = 2 * BUILD_SLICE + 500  # three slices
HOUR_MS = 3_600_000


def _indexed(proc: CoordinatorProcess, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.exited() is None, f"coordinator exited; log:\n{proc.tail()}"
        doc = proc.health()
        if doc and doc["status"] == "ok" and doc.get("indexed_streams", 0) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"not {count} streams indexed in {timeout_s} s; log:\n{proc.tail()}")


def test_a_restart_over_several_slices_indexes_every_stream_while_inputs_flow(
    kafka: KafkaSettings, unique: str, tmp_path: Path
) -> None:
    prefix = f"frebuild-{unique}"
    proc = CoordinatorProcess(
        kafka, prefix, tmp_path / "c", tmp_path / "c.log", partitions=2, engine="faust"
    )
    producer = Producer(kafka.producer(**{"linger.ms": 20}))
    now = time.time_ns() // 1_000_000
    proc.start().wait_ready()
    try:
        for i in range(STREAMS):  # none due within the hour
            sid = f"idle-{i:05d}"
            doc = {"type": "upsert", "stream_id": sid, "start_ms": now, "delay_ms": HOUR_MS}
            producer.produce(f"{prefix}.control", json.dumps(doc).encode(), sid.encode())
        live = {"type": "upsert", "stream_id": "live", "start_ms": now - now % 1000,
                "window_ms": 1000, "step_ms": 1000, "max_in_flight": 1000}  # fmt: skip
        producer.produce(f"{prefix}.control", json.dumps(live).encode(), b"live")
        assert producer.flush(30) == 0
        _indexed(proc, STREAMS + 1, 120)
        proc.stop(10)

        stop = threading.Event()

        def noise() -> None:  # inputs of the idle streams while the new process rebuilds
            n = 0
            while not stop.is_set():
                sid = f"idle-{n % STREAMS:05d}"
                doc = {"type": "upsert", "stream_id": sid, "start_ms": now, "delay_ms": HOUR_MS}
                producer.produce(f"{prefix}.control", json.dumps(doc).encode(), sid.encode())
                producer.poll(0)
                n += 1
                time.sleep(0.002)

        feeder = threading.Thread(target=noise, daemon=True)
        feeder.start()
        proc.start()
        try:
            _indexed(proc, STREAMS + 1, 120)
        finally:
            stop.set()
            feeder.join(5)
            producer.flush(10)
        tail = Tail(kafka, prefix, ["tasks"], f"tail-{unique}")
        try:  # and it goes on serving: the live stream gets new windows
            later = time.time_ns() // 1_000_000
            tail.wait_for("a task of the live stream after the restart", lambda: [
                t for t in tail.values("tasks", "live") if t["dispatched_ms"] >= later
            ])  # fmt: skip
        finally:
            tail.close()
        assert proc.exited() is None
        assert "Take buffer found current_event is None" not in proc.log.read_text()
    finally:
        proc.kill()
