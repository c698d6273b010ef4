"""Bypass retention on the real broker, for both engines: a bypassed window is listed on
`bypassed` for `bypass_retention_ms` (short here), then tombstoned and counted."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streams.kafka.settings import KafkaSettings
from streams.readmodel import ReadModel
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Feed, Responder

pytestmark = pytest.mark.broker

SECOND = 1000
RETENTION_MS = 3000


@pytest.fixture(params=["confluent", "faust"])
def coordinator(
    request: pytest.FixtureRequest, kafka: KafkaSettings, unique: str, tmp_path: Path
) -> Iterator[CoordinatorProcess]:
    engine = request.param
    proc = CoordinatorProcess(
        kafka, f"keep-{unique}", tmp_path / "data", tmp_path / "log", engine=engine
    )
    proc.start().wait_ready()
    try:
        yield proc
    finally:
        proc.stop()


def expired_total(proc: CoordinatorProcess) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{proc.port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("tidemark_bypasses_expired_total "):
                return float(line.split()[1])
    return 0.0


def test_a_bypassed_window_is_tombstoned_after_its_retention(
    kafka: KafkaSettings, coordinator: CoordinatorProcess, unique: str
) -> None:
    prefix = coordinator.env["TIDEMARK_TOPIC_PREFIX"]
    feed = Feed(kafka, prefix)
    model = ReadModel(kafka, prefix)
    stream = f"keep-{unique}"
    start = time.time_ns() // 1_000_000 // SECOND * SECOND - 5 * SECOND

    def answer(task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if task["start_ms"] == start:
            return "nack", {"error": {"kind": "fatal", "message": "source gone"}}
        return "ack", {"ack_ms": task["end_ms"]}

    def listed() -> list[int]:
        model.refresh(timeout_s=5)
        return [b.start_ms for b in model.bypasses() if b.stream_id == stream]

    def wait(what: str, check: Any, timeout_s: float = 30) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if found := check():
                return found
            time.sleep(0.3)
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")

    try:
        with Responder(kafka, prefix, f"r-{unique}", answer):
            feed.upsert(stream, start, window_ms=SECOND, step_ms=SECOND, non_retryable=["fatal"],
                        bypass_retention_ms=RETENTION_MS)  # fmt: skip
            assert wait("the bypass", listed) == [start]
            listed_at = time.monotonic()
            wait("the tombstone", lambda: not listed(), timeout_s=RETENTION_MS / 1000 + 20)
            assert time.monotonic() - listed_at >= RETENTION_MS / 1000 - 1.5
            assert wait("the metric", lambda: expired_total(coordinator) >= 1)
            view = model.stream(stream)
            assert view is not None and view.bypasses == 0 and view.bypassed_total == 1
    finally:
        model.close()
