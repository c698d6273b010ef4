"""The coordinator's gauges for alerts and autoscaling, in-process through the Processor: streams
by state, each pipeline's windows ready and in flight, partitions owned, the outage hold's bound
and the build info (with the worker's)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from streams import buildinfo
from streams.buildinfo import BuildInfoCollector
from streams.coordinator.confluent.engine import ConfluentEngine
from streams.coordinator.health import Outage
from streams.coordinator.settings import CoordinatorSettings
from streams.coordinator.telemetry.metrics import CoordinatorMetrics
from streams.coordinator.telemetry.outage import OutageCollector
from streams.coordinator.telemetry.streams import TrackedStreams
from streams.core import StreamConfig, create_state
from streams.core.view import STATUSES
from streams.topics import Topics
from streams.worker.metrics import WorkerMetrics

from .fake_clients import FakeBroker
from .fakes import Driver, ack, at, nack
from .test_metrics import OTHER, SID, Clock, driver, value

STREAMS = "tidemark_streams"
WINDOWS = "tidemark_pipeline_windows"


def states(d: Driver) -> dict[str, float]:
    return {state: value(d, STREAMS, state=state) for state in STATUSES}


def windows(d: Driver, pipeline: str = "default") -> tuple[float, float]:
    """(ready, in_flight) of `pipeline`."""
    return (
        value(d, WINDOWS, pipeline=pipeline, state="ready"),
        value(d, WINDOWS, pipeline=pipeline, state="in_flight"),
    )


def test_streams_by_state_follow_the_published_views_rule() -> None:
    clock = Clock(at(10, 1, 30))
    d = driver(clock)
    d.upsert(SID, at(10, 0, 30))
    d.upsert(OTHER, at(10, 0, 30))
    d.assign(SID, OTHER)
    assert states(d) == {**dict.fromkeys(STATUSES, 0), "live": 2}
    d.tick(at(10, 1))
    task = next(t for t in d.tasks() if t["stream_id"] == SID)
    d.result(nack(task), at(10, 1, 10))
    d.control({"type": "pause", "stream_id": OTHER}, at(10, 1, 20))
    assert states(d) == {**dict.fromkeys(STATUSES, 0), "retrying": 1, "paused": 1}

    d.control({"type": "resume", "stream_id": OTHER}, at(10, 1, 25))
    # Downstream at 10:00 and a 60 s window: catching up once more than 120 s behind.
    clock.now_ms = at(10, 2)
    assert value(d, STREAMS, state="live") == 1
    clock.now_ms = at(10, 2, 1)
    assert value(d, STREAMS, state="catching up") == 1

    d.control({"type": "delete", "stream_id": OTHER}, at(10, 2, 2))
    assert sum(states(d).values()) == 1
    d.processor.on_revoked([d.partition(SID)])
    assert sum(states(d).values()) == 0


def test_late_streams_are_running_ones_past_two_windows_and_the_delay_retrying_or_not() -> None:
    clock = Clock(at(10, 2))
    d = driver(clock)
    d.upsert(SID, at(10, 0, 30))
    d.upsert(OTHER, at(10, 0, 30), delay_ms=30_000)
    d.assign(SID, OTHER)
    d.tick(at(10, 1, 30))
    task = next(t for t in d.tasks() if t["stream_id"] == SID)
    d.result(nack(task), at(10, 1, 40))  # retrying, downstream still at 10:00
    assert value(d, "tidemark_streams_late") == 0  # 120 s behind: not more than 2 windows
    clock.now_ms = at(10, 2, 1)
    assert value(d, "tidemark_streams_late") == 1  # SID, retrying; OTHER has 30 s of delay
    clock.now_ms = at(10, 2, 31)
    assert value(d, "tidemark_streams_late") == 2
    d.control({"type": "pause", "stream_id": OTHER}, at(10, 2, 31))
    assert value(d, "tidemark_streams_late") == 1  # a paused stream is not late


def test_a_finished_stream_counts_as_finished_until_collected() -> None:
    d = driver(Clock(at(10, 3)))
    d.upsert(SID, at(10, 0, 30), end_ms=at(10, 1))
    d.assign(SID)
    d.tick(at(10, 1))
    (task,) = d.tasks()
    d.result(ack(task), at(10, 1, 1))
    d.tick(at(10, 2))  # the last commit is announced
    assert states(d) == {**dict.fromkeys(STATUSES, 0), "finished": 1}
    assert windows(d) == (0, 0)


def test_pipeline_windows_count_due_undispatched_and_in_flight_per_pipeline() -> None:
    clock = Clock(at(10, 1, 30))
    d = driver(clock)
    d.upsert(SID, at(10, 0, 30), max_in_flight=3, pipeline="fast")
    d.upsert(OTHER, at(10, 0, 30))
    d.assign(SID, OTHER)
    # Created at 10:00:30, their first windows (10:00, 10:01] are due at 10:01: not dispatched
    # before a tick, they are ready once the clock passes that.
    assert windows(d, "fast") == (1, 0)
    assert windows(d) == (1, 0)
    clock.now_ms = at(10, 0, 59)
    assert windows(d, "fast") == (0, 0)

    clock.now_ms = at(10, 5, 30)
    d.tick(at(10, 5))  # catching up: three windows of `fast` in flight, one of the default's
    assert windows(d, "fast") == (0, 3)
    assert windows(d) == (0, 1)
    task = next(t for t in d.tasks() if t["stream_id"] == OTHER)
    d.result(nack(task), at(10, 5, 1))  # retried 60 s later, at 10:06:01
    assert windows(d) == (0, 0)
    clock.now_ms = at(10, 6, 2)
    assert windows(d) == (1, 0)
    d.control({"type": "pause", "stream_id": OTHER}, at(10, 5, 3))
    assert windows(d) == (0, 0)  # a paused stream has nothing ready


def test_a_new_owner_counts_states_and_windows_rebuilt_from_the_table() -> None:
    d = driver()
    d.upsert(SID, at(10, 0, 30))
    d.assign(SID)
    d.tick(at(10, 1))
    (task,) = d.tasks()
    d.result(nack(task), at(10, 1, 1))
    d = d.restart()
    d.processor.metrics = CoordinatorMetrics(clock_ms=Clock(at(10, 1, 30)))
    assert sum(states(d).values()) == 0
    d.assign(SID)
    d.tick(at(10, 1, 30))  # rebuilds the partition's index; the retry is not due yet
    assert states(d)["retrying"] == 1
    assert windows(d) == (0, 0)


def test_partitions_owned_and_total() -> None:
    d = Driver(partitions=6)
    assert value(d, "tidemark_partitions_total") == 6
    assert value(d, "tidemark_partitions_owned") == 0
    d.processor.on_assigned([0, 2, 5])
    assert value(d, "tidemark_partitions_owned") == 3
    d.processor.on_revoked([2])
    assert value(d, "tidemark_partitions_owned") == 2


def test_the_outage_gauges_say_the_longest_hold() -> None:
    outage = Outage("S", failing=3, total=4, since_ms=at(10, 0), held=2)
    registry = CollectorRegistry()
    registry.register(OutageCollector(lambda: [outage], 6 * 3_600_000, lambda: at(10, 30)))
    assert registry.get_sample_value("tidemark_outage_max_hold_seconds") == 21_600
    assert registry.get_sample_value("tidemark_outage_hold_seconds", {"source": "S"}) == 1800


def test_build_info_names_the_installed_version_and_the_engine() -> None:
    installed = importlib.metadata.version("tidemark")
    coordinator = CollectorRegistry()
    coordinator.register(BuildInfoCollector(engine="faust"))
    labels = {"version": installed, "engine": "faust"}
    assert coordinator.get_sample_value("tidemark_build_info", labels) == 1
    worker = CollectorRegistry()
    WorkerMetrics(worker)
    assert worker.get_sample_value("tidemark_build_info", {"version": installed}) == 1


def test_build_info_without_an_installed_distribution_says_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(buildinfo, "DISTRIBUTION", "tidemark-not-installed")
    assert buildinfo.version() == "unknown"


def test_the_confluent_engine_registers_its_build_info_and_the_processors_gauges(
    tmp_path: Path,
) -> None:
    settings = CoordinatorSettings(
        topics=Topics("gauges"), data_dir=tmp_path, partitions=4, instance_id="a"
    )
    engine = ConfluentEngine(settings, clients=FakeBroker(4).make, probe=lambda: True)
    registry = engine.metrics.registry
    labels = {"version": importlib.metadata.version("tidemark"), "engine": "confluent"}
    assert registry.get_sample_value("tidemark_build_info", labels) == 1
    assert registry.get_sample_value("tidemark_partitions_total") == 4
    assert registry.get_sample_value("tidemark_outage_max_hold_seconds") == 6 * 3600


def test_tracked_streams_make_records_from_the_latest_parked_state_within_a_bound() -> None:
    """A decision parks its state; a read makes the record from the latest one; a forget drops
    a parked one; no more than PENDING_MAX states stay parked (streams.coordinator.telemetry
    .streams.TrackedStreams)."""

    def state(stream_id: str, start_ms: int, pipeline: str = "default") -> Any:
        config = StreamConfig(stream_id=stream_id, start_ms=start_ms, pipeline=pipeline)
        return create_state(config, start_ms).state

    tracked = TrackedStreams()
    tracked.PENDING_MAX = 3
    tracked.note(0, state("a", 60_000))
    tracked.note(0, state("a", 120_000, "logs"))  # the latest counts
    tracked.note(1, state("b", 60_000))
    assert sorted((r[0], r[1], r[6]) for r in tracked.records()) == [
        (0, "logs", 120_000),
        (1, "default", 60_000),
    ]
    tracked.note(0, state("c", 60_000))
    tracked.forget("c")  # parked, then forgotten: never counted
    assert [r[1] for r in tracked.records()] == ["logs", "default"]
    for n in range(7):
        tracked.note(0, state(f"s-{n}", 60_000))
        assert len(tracked._pending) < tracked.PENDING_MAX
    tracked.note_progress(0, "s-6", 180_000, 0)  # a parked stream's summary comes after it
    assert ("s-6", 180_000) in tracked.downstreams()
    assert tracked.drop_partition(1) == ["b"] and len(tracked.records()) == 8
