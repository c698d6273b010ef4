"""Bounded streams and the collection of ended ones, on the real broker, for both engines.

A stream with `end_ms` finishes there; a late result is rejected with the reason while its state
is kept (`gc_grace_ms`, short here); then its state is collected: its view is tombstoned and a
result is an unknown stream's. A deleted stream is kept and collected the same way.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streams.kafka.settings import KafkaSettings
from streams.readmodel import ReadModel
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Feed, Responder, Tail

pytestmark = pytest.mark.broker

SECOND = 1000
GRACE_MS = 8000


@pytest.fixture(params=["confluent", "faust"])
def prefix(
    request: pytest.FixtureRequest, kafka: KafkaSettings, unique: str, tmp_path: Path
) -> Iterator[str]:
    name = f"bounded-{unique}"
    proc = CoordinatorProcess(
        kafka, name, tmp_path / "data", tmp_path / "log", engine=request.param
    )
    proc.start().wait_ready()
    try:
        yield name
    finally:
        proc.stop()


def wait(what: str, check: Any, timeout_s: float = 40) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def test_a_bounded_stream_finishes_then_its_state_is_collected(
    kafka: KafkaSettings, prefix: str, unique: str
) -> None:
    feed = Feed(kafka, prefix)
    model = ReadModel(kafka, prefix)
    rejected = Tail(kafka, prefix, ["rejected"], f"rej-{unique}")
    start = time.time_ns() // 1_000_000 // SECOND * SECOND - 10 * SECOND
    end = start + 3 * SECOND
    bounded, gone = f"bounded-{unique}", f"gone-{unique}"
    acked: list[dict[str, Any]] = []

    def answer(task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        acked.append(task)
        return "ack", {"ack_ms": task["end_ms"]}

    def view(stream_id: str) -> Any:
        model.refresh(timeout_s=5)
        return model.stream(stream_id)

    def reasons() -> list[str]:
        rejected.poll()
        return [v["reason"] for v in rejected.values("rejected")]

    fast = {"window_ms": SECOND, "step_ms": SECOND, "gc_grace_ms": GRACE_MS}
    try:
        with Responder(kafka, prefix, f"r-{unique}", answer):
            feed.upsert(bounded, start, end_ms=end, **fast)
            finished = wait("the stream to finish", lambda: (
                (v := view(bounded)) is not None and v.status == "finished" and v))  # fmt: skip
            assert finished.downstream_ms == end and finished.window is None
            assert {(t["start_ms"], t["end_ms"]) for t in acked} == {
                (start + i * SECOND, start + (i + 1) * SECOND) for i in range(3)
            }
            # Late: the stream finished. Sent at once, so that it is read within gc_grace_ms
            # of the finish (sent after the second stream's steps, it came past the grace at
            # load: the stream was collected and the result "unknown").
            first = acked[0]
            feed.ack(first)
            feed.upsert(gone, start, **fast)
            wait("the second stream", lambda: view(gone))
            feed.send("control", {"type": "delete", "stream_id": gone})
            wait("the delete", lambda: view(gone) is None)
            deleted_by = time.monotonic()

        late = wait(
            "the late result's rejection", lambda: [r for r in reasons() if "finished" in r]
        )
        assert late[0].startswith(f"stream finished at end_ms {end}")
        assert "(gc_grace_ms), then forgotten" in late[0]
        late_for_deleted = {**first, "stream_id": gone}
        feed.ack(late_for_deleted)
        wait("the deleted stream's rejection", lambda: [r for r in reasons() if "deleted at" in r])

        # After gc_grace_ms the state is collected: the view goes, results are unknown.
        wait("the collection", lambda: view(bounded) is None, timeout_s=GRACE_MS / 1000 + 20)
        time.sleep(max(0.0, deleted_by + GRACE_MS / 1000 + 2 - time.monotonic()))
        before = len(reasons())
        feed.ack(first)
        feed.ack(late_for_deleted)
        after = wait("two more rejections", lambda: len(r := reasons()) >= before + 2 and r)
        assert after[before:] == ["unknown stream", "unknown stream"]
    finally:
        rejected.close()
        model.close()
