"""The read model on the real broker, built from `streams` and `bypassed` alone.

Two coordinators split the partitions; a stand-in worker answers tasks (it reads `tasks` and
writes `results`, as workers do), and everything the test checks it reads through the read
model, which reads neither `tasks`, `results` nor `commits`. Both engines.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streams.coordinator.processor import partition_of
from streams.kafka.settings import KafkaSettings
from streams.readmodel import ReadModel, ReadView
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Feed, Responder

pytestmark = pytest.mark.broker
# The Faust engine's variants of these run in `make test-long` (tests/conftest.py).
LONG_ON_FAUST = ("test_every_stream_is_shown_from_streams_and_bypassed_alone",)

PARTITIONS = 4
SECOND = 1000
FAST = {
    "window_ms": SECOND,
    "step_ms": SECOND,
    "bypass_after_ms": 1500,
    "retry": {"strategy": "fixed", "interval_ms": 300},
    "task_timeout_ms": 1000,
}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def wait_until(
    model: ReadModel, what: str, check: Callable[[ReadModel], bool], timeout_s: float = 40
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        model.refresh(timeout_s=5)
        if check(model):
            return
        time.sleep(0.3)
    shown = {v.stream_id: (v.status, v.downstream_ms, v.incarnation) for v in model.streams()}
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; shown: {shown}")


def shown(model: ReadModel, stream_id: str) -> ReadView:
    view = model.stream(stream_id)
    assert view is not None, f"{stream_id} is not shown"
    return view


@pytest.mark.parametrize("engine", ["confluent", "faust"])
def test_every_stream_is_shown_from_streams_and_bypassed_alone(
    kafka: KafkaSettings, unique: str, tmp_path: Path, engine: str
) -> None:
    prefix = f"view-{unique}"
    a, b = (
        CoordinatorProcess(
            kafka, prefix, tmp_path / n, tmp_path / f"{n}.log", PARTITIONS, engine=engine
        )
        for n in "ab"
    )
    a.start().wait_ready(partitions=PARTITIONS)
    b.start()
    model = ReadModel(kafka, prefix)
    assert set(model._short.values()) == {"streams", "bypassed"}  # nothing else is read
    feed = Feed(kafka, prefix)
    try:
        b.wait_ready()
        owned_by_b = set(b.wait_ready()["partitions"])
        # At least 8, and one in every partition, so that some live on the second coordinator
        # whatever it was assigned (8 names, random with `unique`, missed every partition it
        # owned once in CI).
        healthy: list[str] = []
        while (
            len(healthy) < 8
            or len({partition_of(s.encode(), PARTITIONS) for s in healthy}) < PARTITIONS
        ):
            healthy.append(f"ok{len(healthy)}-{unique}")
        on_b = [s for s in healthy if partition_of(s.encode(), PARTITIONS) in owned_by_b]
        failing, paused, deleted, again = (
            f"{name}-{unique}" for name in ("bad", "paused", "gone", "again")
        )
        start = now_ms() // SECOND * SECOND - 20 * SECOND

        def answer(task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
            if task["stream_id"] == failing and not task.get("replay"):
                return "nack", {"error": {"kind": "no_data", "message": "source down"}}
            return "ack", {"ack_ms": task["end_ms"]}

        with Responder(kafka, prefix, f"r-{unique}", answer):
            for s in [*healthy, failing, paused, deleted, again]:
                feed.upsert(s, start, **FAST)
            feed.send("control", {"type": "pause", "stream_id": paused})
            feed.send("control", {"type": "delete", "stream_id": deleted})
            feed.send("control", {"type": "delete", "stream_id": again})
            feed.upsert(again, start - 60 * SECOND, **{**FAST, "window_ms": 2 * SECOND})

            def settled(rm: ReadModel) -> bool:
                views = {v.stream_id: v for v in rm.streams()}
                return (
                    all(s in views and views[s].downstream_ms > start for s in healthy)
                    and failing in views
                    and views[failing].bypasses >= 1
                    # the view counts them too: the confluent engine publishes a stream's view
                    # at most once a second, a bypass record at once
                    and views[failing].bypassed_total >= views[failing].bypasses
                    and paused in views
                    and views[paused].paused
                    and deleted not in views
                    and again in views
                    and views[again].config["window_ms"] == 2 * SECOND
                )

            wait_until(model, "every stream as it should be", settled)
            assert [v.stream_id for v in model.streams()] == sorted(
                [*healthy, failing, paused, again]
            )
            bad = shown(model, failing)
            assert bad.bypassed_total >= bad.bypasses >= 1
            listed = [w for w in model.bypasses() if w.stream_id == failing]
            assert len(listed) == bad.bypasses
            assert listed[0].last_error == {"kind": "no_data", "message": "source down"}
            assert shown(model, paused).state(now_ms()) == "paused"
            recreated = shown(model, again)
            assert recreated.config["start_ms"] == start - 60 * SECOND
            assert recreated.downstream_ms >= start - 60 * SECOND

            # The second coordinator stops: the first takes its streams over, and they
            # keep moving in the view.
            assert on_b, "some streams live on the second coordinator"
            assert b.stop() < 10
            stopped_ms = now_ms()
            marks = {s: shown(model, s).downstream_ms for s in on_b}
            wait_until(
                model,
                "b's streams to move on under a",
                lambda rm: all(
                    shown(rm, s).downstream_ms > marks[s] and shown(rm, s).changed_ms > stopped_ms
                    for s in on_b
                ),
            )

        # A new reader starts from the compacted topics and sees the same cluster.
        fresh = ReadModel(kafka, prefix)
        try:
            wait_until(fresh, "a fresh read model to catch up", lambda rm: rm.caught_up)
            latest = {v.stream_id: v for v in model.streams()}
            for view in fresh.streams():
                assert view.incarnation == latest[view.stream_id].incarnation
                assert view.downstream_ms >= latest[view.stream_id].downstream_ms
            assert {v.stream_id for v in fresh.streams()} == set(latest)
        finally:
            fresh.close()
    finally:
        model.close()
        b.kill()
        a.stop()
