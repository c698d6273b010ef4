"""The coordinator's metrics: in-process through the Processor, then once end to end over HTTP.

In-process tests drive the Processor with the fakes (explicit clocks) and read the samples from
its registry; the end-to-end test scrapes `/metrics` of a real `tidemark coordinator` while a
stand-in worker acks one stream and nacks another until it is bypassed.
"""

from __future__ import annotations

import collections
import random
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streams.coordinator.telemetry.lag import ConsumerLagCollector, consumer_groups
from streams.coordinator.telemetry.metrics import CoordinatorMetrics
from streams.coordinator.telemetry.progress import PROGRESS_BUCKETS
from streams.errors import BrokerUnavailable
from streams.kafka.lag import LagRow
from streams.kafka.settings import KafkaSettings
from streams.topics import Topics
from streams.worker.metrics import WorkerMetrics
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Feed, Responder, Tail

from .fakes import T0, Driver, ack, at, nack

SID = "cluster-a"
OTHER = "cluster-b"
FAST_RETRY = {"retry": {"strategy": "fixed", "interval_ms": 500}, "bypass_after_ms": 3000}


class Clock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def driver(
    clock: Clock | None = None, top: int = 20, threshold_s: float = 300, **kw: Any
) -> Driver:
    """A Driver whose processor has metrics on an explicit clock (default 10:10)."""
    d = Driver(**kw)
    d.processor.metrics = CoordinatorMetrics(
        top_laggards=top, behind_threshold_s=threshold_s, clock_ms=clock or Clock(at(10, 10))
    )
    return d


def value(d: Driver, name: str, **labels: str) -> float:
    found = d.processor.metrics.registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def started(d: Driver, **config: Any) -> dict[str, Any]:
    """cluster-a created at 10:00:30 and its first window (10:00, 10:01] dispatched at 10:01."""
    d.upsert(SID, at(10, 0, 30), **config)
    d.assign(SID)
    d.tick(at(10, 0, 30))
    d.tick(at(10, 1))
    (task,) = d.tasks()
    d.emitter.clear()
    return task


# -- counters -----------------------------------------------------------------------------------


def test_results_by_outcome_ignored_and_rejected_inputs_are_counted() -> None:
    d = driver()
    task = started(d)
    d.result(ack(task), at(10, 1, 1))
    d.result(ack(task), at(10, 1, 2))  # a duplicate
    d.result(b"{not json", at(10, 1, 3), key=SID.encode())
    d.control({"type": "pause", "stream_id": "never-created"}, at(10, 1, 4))

    assert value(d, "tidemark_results_total", outcome="ack") == 2
    assert value(d, "tidemark_results_total", outcome="nack") == 0
    assert value(d, "tidemark_ignored_total", reason="duplicate") == 1
    assert value(d, "tidemark_ignored_total", reason="stale") == 0
    assert value(d, "tidemark_rejected_total", topic="tidemark.results") == 1
    assert value(d, "tidemark_rejected_total", topic="tidemark.control") == 1
    assert value(d, "tidemark_tasks_dispatched_total") == 1  # the next window is due at 10:02
    assert value(d, "tidemark_commits_total") == 1


def test_requeues_timeouts_bypasses_and_stale_results_are_counted() -> None:
    d = driver()
    task = started(d, task_timeout_ms=1000, **FAST_RETRY)
    d.result(nack(task), at(10, 1, 0, 500))
    assert value(d, "tidemark_requeues_total") == 1
    d.result(nack(task), at(10, 1, 0, 600))  # the same attempt again: stale
    assert value(d, "tidemark_ignored_total", reason="stale") == 1

    now = at(10, 1, 1)
    while not d.bypassed():  # retries every 500 ms, each timing out after 1 s
        d.tick(now)
        now += 100
    timeouts = value(d, "tidemark_timeouts_total")
    assert timeouts >= 2
    assert value(d, "tidemark_bypasses_total") == len(d.bypassed()) == 1
    # Every failure is either requeued or bypassed: the one nack applied, and the timeouts.
    requeues, bypasses = value(d, "tidemark_requeues_total"), value(d, "tidemark_bypasses_total")
    assert requeues + bypasses == 1 + timeouts
    assert value(d, "tidemark_results_total", outcome="nack") == 2


def test_dispatch_delay_is_measured_from_the_due_time_of_each_attempt() -> None:
    d = driver()
    d.upsert(SID, at(10, 0, 30), delay_ms=5000, **FAST_RETRY)
    d.assign(SID)
    d.tick(at(10, 0, 30))
    d.tick(at(10, 1, 5, 250))  # due at end_ms + delay_ms = 10:01:05
    (task,) = d.tasks()
    histogram = "tidemark_dispatch_delay_seconds"
    live = {"class": "live"}
    assert value(d, f"{histogram}_count", **live) == 1
    assert value(d, f"{histogram}_sum", **live) == pytest.approx(0.25)

    d.result(nack(task), at(10, 1, 6))  # the retry is due 500 ms later
    d.tick(at(10, 1, 6, 400))
    assert value(d, f"{histogram}_count", **live) == 1
    d.tick(at(10, 1, 7, 100))
    assert [t["attempt"] for t in d.tasks()] == [1, 2]
    assert value(d, f"{histogram}_count", **live) == 2
    assert value(d, f"{histogram}_sum", **live) == pytest.approx(0.25 + 0.6)
    assert value(d, f"{histogram}_bucket", le="0.5", **live) == 1
    assert value(d, f"{histogram}_bucket", le="1.0", **live) == 2
    assert value(d, f"{histogram}_count", **{"class": "catchup"}) == 0


def test_catching_up_windows_are_measured_apart_from_live_ones() -> None:
    """A stream created an hour back: its old windows are late by up to an hour, and count as
    catching up; its newest window, dispatched when due, counts as live."""
    d = driver()
    d.upsert(SID, at(11, 0, 30), start_ms=at(10, 0), max_in_flight=100)
    d.assign(SID)
    d.tick(at(11, 0, 30))
    histogram = "tidemark_dispatch_delay_seconds"
    catchup = {"class": "catchup"}
    assert value(d, f"{histogram}_count", **catchup) == 59  # (10:00, 10:01] to (10:58, 10:59]
    assert value(d, f"{histogram}_bucket", le="60.0", **catchup) == 0  # each over a minute late
    assert value(d, f"{histogram}_count", **{"class": "live"}) == 1  # (10:59, 11:00], 30 s late
    assert value(d, f"{histogram}_sum", **{"class": "live"}) == pytest.approx(30)


def test_ack_to_commit_covers_the_coalescing_interval() -> None:
    d = driver(flush_ms=200)
    d.upsert(SID, at(10, 5), max_in_flight=3)
    d.assign(SID)
    d.tick(at(10, 5))
    first, second, third = d.tasks()
    now = at(10, 5, 10)
    histogram = "tidemark_ack_to_commit_seconds"

    d.result(ack(first), now)  # committed at once
    assert value(d, f"{histogram}_count") == 1 and value(d, f"{histogram}_sum") == 0
    d.result(ack(third), now + 50)  # waits for the second window
    d.result(ack(second), now + 120)
    assert value(d, f"{histogram}_count") == 1
    d.tick(now + 200)  # the flush announces both
    assert value(d, f"{histogram}_count") == 3
    assert value(d, f"{histogram}_sum") == pytest.approx(0.150 + 0.080)


def test_an_ack_behind_an_unfinished_window_waits_for_the_commit_that_passes_it() -> None:
    d = driver(flush_ms=0)
    d.upsert(SID, at(10, 5), max_in_flight=2)
    d.assign(SID)
    d.tick(at(10, 5))
    first, second = d.tasks()
    d.result(ack(second), at(10, 5, 1))  # after an unfinished window: not announced yet
    assert value(d, "tidemark_ack_to_commit_seconds_count") == 0
    d.result(ack(first), at(10, 5, 3))
    assert value(d, "tidemark_ack_to_commit_seconds_count") == 2
    assert value(d, "tidemark_ack_to_commit_seconds_sum") == pytest.approx(2.0)


# -- windows in flight and progress lag -------------------------------------------------------


def test_windows_in_flight_follow_dispatches_results_deletes_and_revokes() -> None:
    d = driver()
    d.upsert(SID, at(10, 5), max_in_flight=3)
    d.upsert(OTHER, at(10, 5))
    d.assign(SID, OTHER)
    d.tick(at(10, 5))
    assert value(d, "tidemark_windows_in_flight") == 4
    first, second, _ = [t for t in d.tasks() if t["stream_id"] == SID]
    d.result(ack(first), at(10, 5, 1))  # (10:03, 10:04] takes its place, due already
    assert value(d, "tidemark_windows_in_flight") == 4
    d.result(nack(second), at(10, 5, 2))  # waits 60 s for its retry
    assert value(d, "tidemark_windows_in_flight") == 3

    d.control({"type": "delete", "stream_id": OTHER}, at(10, 5, 3))
    assert value(d, "tidemark_windows_in_flight") == 2
    d.processor.on_revoked([d.partition(SID)])
    assert value(d, "tidemark_windows_in_flight") == 0
    assert value(d, "tidemark_progress_lag_seconds_gcount") == 0


def test_progress_lag_histogram_top_laggards_and_streams_behind() -> None:
    clock = Clock(at(10, 10))
    d = driver(clock, top=1, threshold_s=400)
    d.upsert(SID, at(10, 0, 30))  # downstream_ms = start_ms = 10:00: 600 s behind at 10:10
    d.upsert(OTHER, at(10, 0, 30), start_ms=at(10, 5))  # 300 s behind

    assert value(d, "tidemark_progress_lag_seconds_gcount") == 2
    assert value(d, "tidemark_progress_lag_seconds_gsum") == 900
    assert value(d, "tidemark_progress_lag_seconds_bucket", le="120.0") == 0
    assert value(d, "tidemark_progress_lag_seconds_bucket", le="300.0") == 1  # le is inclusive
    assert value(d, "tidemark_progress_lag_seconds_bucket", le="600.0") == 2
    assert value(d, "tidemark_progress_lag_seconds_bucket", le="+Inf") == 2
    assert value(d, "tidemark_progress_lag_top_seconds", stream_id=SID) == 600
    assert d.processor.metrics.registry.get_sample_value(
        "tidemark_progress_lag_top_seconds", {"stream_id": OTHER}
    ) is None  # fmt: skip
    assert value(d, "tidemark_streams_behind", threshold="400") == 1

    # cluster-a's first window is acked: downstream_ms moves to 10:01.
    d.assign(SID)
    d.tick(at(10, 1))
    (task,) = [t for t in d.tasks() if t["stream_id"] == SID]
    d.result(ack(task), at(10, 1, 1))
    clock.now_ms = at(10, 11)
    assert value(d, "tidemark_progress_lag_top_seconds", stream_id=SID) == 600
    assert value(d, "tidemark_progress_lag_seconds_gsum") == 600 + 360
    clock.now_ms = at(10, 4)  # downstream_ms ahead of now counts as no lag
    assert value(d, "tidemark_progress_lag_seconds_gsum") == 180
    assert value(d, "tidemark_streams_behind", threshold="400") == 0


def test_the_progress_histogram_matches_a_direct_count() -> None:
    now = at(12, 0)
    rng = random.Random(7)
    bounds = [b * 1000 for b in PROGRESS_BUCKETS]
    # Marks on bucket bounds, just off them, in the future, and anywhere.
    marks = [now - b + d for b in bounds for d in (-1, 0, 1)] + [now + 5, now]
    marks += [now - rng.randrange(40 * 86_400_000) for _ in range(200)]
    metrics = CoordinatorMetrics(clock_ms=Clock(now), behind_threshold_s=300)
    for i, mark in enumerate(marks):
        metrics.track_progress(0, f"s{i}", mark, 0)
    lags = [max(0, now - mark) / 1000 for mark in marks]

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    for bound in PROGRESS_BUCKETS:
        expected = sum(lag <= bound for lag in lags)
        assert sample("tidemark_progress_lag_seconds_bucket", le=repr(float(bound))) == expected
    assert sample("tidemark_progress_lag_seconds_bucket", le="+Inf") == len(marks)
    assert sample("tidemark_progress_lag_seconds_gsum") == pytest.approx(sum(lags))
    assert sample("tidemark_streams_behind", threshold="300") == sum(lag > 300 for lag in lags)
    top = sorted(lags, reverse=True)[:20]
    (family,) = [f for f in metrics.registry.collect() if f.name.endswith("lag_top_seconds")]
    found = [s.value for s in family.samples]
    assert sorted(found, reverse=True) == top


def test_a_new_owner_reports_progress_rebuilt_from_the_table_without_new_input() -> None:
    d = driver()
    task = started(d)
    d.result(ack(task), at(10, 1, 1))
    d = d.restart()
    clock = Clock(at(10, 11))
    d.processor.metrics = CoordinatorMetrics(clock_ms=clock)
    assert value(d, "tidemark_progress_lag_seconds_gcount") == 0
    d.assign(SID)
    d.tick(at(10, 1, 30))  # the first tick of the partition rebuilds its index; nothing is due
    assert d.tasks() == []
    assert value(d, "tidemark_progress_lag_top_seconds", stream_id=SID) == 600
    assert value(d, "tidemark_windows_in_flight") == 0
    d.tick(at(10, 2))
    assert value(d, "tidemark_windows_in_flight") == 1  # (10:01, 10:02]


def test_a_scrape_reads_no_table_and_its_output_is_valid_exposition() -> None:
    d = driver(Clock(at(11, 0)))  # s0 is 3600 s behind, s1 3540 s, ..., s49 660 s
    for i in range(50):
        d.upsert(f"s{i}", at(10, 0, 30), start_ms=T0 + i * 60_000)

    def no_reads(*args: Any) -> Any:
        raise AssertionError("a scrape read the table")

    d.store.get = no_reads  # type: ignore[method-assign]
    d.store.items = no_reads  # type: ignore[method-assign]
    text = generate_latest(d.processor.metrics.registry).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    top = families["tidemark_progress_lag_top_seconds"].samples
    assert len(top) == 20  # the default top N
    assert {s.labels["stream_id"] for s in top} == {f"s{i}" for i in range(20)}
    assert value(d, "tidemark_streams_behind", threshold="300") == 50
    promtool = shutil.which("promtool")
    if promtool:
        check = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                               capture_output=True, timeout=30)  # fmt: skip
        assert check.returncode == 0, check.stdout + check.stderr


# -- consumer lag collector --------------------------------------------------------------------


def rows(lag: int) -> list[LagRow]:
    return [LagRow("tidemark-coordinator", "tidemark.results", 0, 10, 10 + lag, lag)]


def lag_samples(registry: CollectorRegistry) -> dict[tuple[str, str, str], float]:
    families = text_string_to_metric_families(generate_latest(registry).decode())
    family = next(f for f in families if f.name == "tidemark_consumer_lag")
    return {(s.labels["group"], s.labels["topic"], s.labels["partition"]): s.value
            for s in family.samples}  # fmt: skip


def test_consumer_lag_is_served_from_the_last_refresh_and_dropped_when_stale() -> None:
    answers: list[Callable[[], list[LagRow]]] = [lambda: rows(3), lambda: rows(5)]

    def fetch() -> list[LagRow]:
        return answers.pop(0)()

    def unavailable() -> list[LagRow]:
        raise BrokerUnavailable("no broker")

    collector = ConsumerLagCollector(fetch, stale_after_s=0.5)
    registry = CollectorRegistry()
    registry.register(collector)
    assert lag_samples(registry) == {}
    assert collector.refresh()
    assert lag_samples(registry) == {("tidemark-coordinator", "tidemark.results", "0"): 3}
    answers.append(unavailable)
    assert collector.refresh() and not collector.refresh()  # 5, then a failure keeps the 5
    assert lag_samples(registry) == {("tidemark-coordinator", "tidemark.results", "0"): 5}
    time.sleep(0.6)
    assert lag_samples(registry) == {}  # too old to be trusted


def test_the_consumer_lag_thread_refreshes_until_stopped() -> None:
    calls = threading.Semaphore(0)

    def fetch() -> list[LagRow]:
        calls.release()
        return rows(1)

    collector = ConsumerLagCollector(fetch, interval_s=0.05)
    collector.start()
    try:
        for _ in range(3):
            assert calls.acquire(timeout=5)
    finally:
        collector.stop()
    assert not any(t.name == "consumer-lag" for t in threading.enumerate())


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def test_a_lag_read_that_fails_in_any_way_skips_the_refresh_with_a_rate_limited_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A gauge must never take the coordinator down: whatever the reader raises (a bug, a
    # librdkafka error left untranslated) ends one refresh, with a WARNING at most once a minute.
    failures: list[Exception] = [RuntimeError("native trouble"), ValueError("bad answer"),
                                 BrokerUnavailable("no broker"), RuntimeError("again")]  # fmt: skip

    def fetch() -> list[LagRow]:
        if failures:
            raise failures.pop(0)
        return rows(2)

    clock = FakeClock()
    collector = ConsumerLagCollector(fetch, warn_every_s=60.0, clock_s=clock)
    registry = CollectorRegistry()
    registry.register(collector)
    with caplog.at_level("INFO", logger="streams.coordinator"):
        assert not collector.refresh()  # logged
        clock.now_s += 5
        assert not collector.refresh() and not collector.refresh()  # within the minute: quiet
        assert lag_samples(registry) == {}  # nothing read yet: the gauge is skipped
        clock.now_s += 60
        assert not collector.refresh()  # a minute on: logged, with the count of the quiet ones
        assert collector.refresh()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 2, warnings
    assert "native trouble" in warnings[0] and "again" in warnings[1]
    assert "2 failed refreshes since the last warning" in warnings[1]  # the quiet ones
    assert any("refreshed again" in r.getMessage() for r in caplog.records)
    assert lag_samples(registry) == {("tidemark-coordinator", "tidemark.results", "0"): 2}


def test_the_lag_thread_closes_its_reader_from_its_own_thread_when_stopped() -> None:
    closed_in: list[str] = []
    collector = ConsumerLagCollector(
        lambda: rows(1), interval_s=0.05,
        close=lambda: closed_in.append(threading.current_thread().name),
    )  # fmt: skip
    collector.start()
    collector.stop()
    assert closed_in == ["consumer-lag"]  # never closed under a refresh in flight


def test_the_reported_groups_are_the_coordinators_and_the_workers() -> None:
    groups = consumer_groups(Topics("tm"))
    assert "tm-coordinator".startswith(groups)
    assert "tm-workers-synthetic".startswith(groups)
    assert not "tm2-coordinator".startswith(groups)
    assert not "tail-tm".startswith(groups)


def test_coordinator_and_worker_metric_names_do_not_collide() -> None:
    def names(registry: CollectorRegistry) -> set[str]:
        return {m.name for m in registry.collect()}

    coordinator = CoordinatorMetrics().registry
    coordinator.register(ConsumerLagCollector(lambda: []))
    worker = CollectorRegistry()
    WorkerMetrics(worker)
    assert names(coordinator) and names(worker)
    assert names(coordinator).isdisjoint(names(worker))


# -- end to end ------------------------------------------------------------------------------

WINDOW = 60_000
FAST = {"task_timeout_ms": 1000, **FAST_RETRY}
COUNTERS = [
    f"tidemark_{name}_total"
    for name in ("results", "ignored", "requeues", "timeouts", "bypasses", "tasks_dispatched",
                 "commits")
]  # fmt: skip


def now_ms() -> int:
    return time.time_ns() // 1_000_000


Scraped = dict[str, dict[tuple[tuple[str, str], ...], float]]


def scrape(port: int) -> Scraped:
    """name -> {sorted labels: value} from a coordinator's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        text = response.read().decode()
    found: Scraped = collections.defaultdict(dict)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name][tuple(sorted(sample.labels.items()))] = sample.value
    return found


def one(metrics: Scraped, name: str, **labels: str) -> float:
    return metrics[name].get(tuple(sorted(labels.items())), 0.0)


def by_label(metrics: Scraped, name: str, label: str) -> dict[str, float]:
    return {dict(labels)[label]: v for labels, v in metrics[name].items()}


@pytest.mark.broker
def test_metrics_end_to_end(kafka: KafkaSettings, unique: str, tmp_path: Path) -> None:
    prefix = f"metrics-{unique}"
    proc = CoordinatorProcess(kafka, prefix, tmp_path / "data", tmp_path / "log", partitions=2)
    proc.start().wait_ready()
    feed = Feed(kafka, prefix)
    tail = Tail(kafka, prefix, ["tasks", "commits", "bypassed"], f"tail-{unique}")
    now = now_ms()
    start = now - now % WINDOW - 30 * WINDOW  # half an hour behind
    healthy, failing = f"ok-{unique}", f"bad-{unique}"
    sent: collections.Counter[str] = collections.Counter()
    workers = f"{prefix}-workers-test"

    def policy(task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if task["stream_id"] == healthy:
            sent["ack"] += 1
            return "ack", {"ack_ms": task["end_ms"]}
        sent["nack"] += 1
        return "nack", {"error": {"kind": "no_data", "message": "outage"}}

    def caught_up_and_bypassed() -> bool:
        marks = [c["downstream_ms"] for c in tail.values("commits", healthy)]
        return bool(tail.values("bypassed", failing)) and max(marks, default=0) >= now - 2 * WINDOW

    def lag_of_both_groups() -> bool:
        groups = by_label(scrape(proc.port), "tidemark_consumer_lag", "group")
        return {Topics(prefix).eos_group, workers} <= groups.keys()  # the confluent engine's

    try:
        feed.upsert(healthy, start)  # a 60 s task timeout: each window is acked exactly once
        feed.upsert(failing, start, **FAST)
        with Responder(kafka, prefix, workers, policy):
            # 60 s: at load 60 the stand-in worker took 20 s to join its group and be assigned.
            tail.wait_for(
                "a bypass, and the healthy stream at now", caught_up_and_bypassed, timeout_s=60
            )
            tail.wait_for("consumer lag of both groups", lag_of_both_groups, timeout_s=20)
        for stream_id in (healthy, failing):  # nothing new after this, once in-flight time out
            feed.send("control", {"type": "pause", "stream_id": stream_id})

        def settled() -> tuple[Scraped, int] | None:
            """A scrape once every result was handled and nothing moved for half a second."""
            first = scrape(proc.port)
            if not (
                one(first, "tidemark_results_total", outcome="ack") == sent["ack"]
                and one(first, "tidemark_results_total", outcome="nack") == sent["nack"]
                and one(first, "tidemark_windows_in_flight") == 0
            ):
                return None
            time.sleep(0.5)
            second, at_ms = scrape(proc.port), now_ms()
            return (second, at_ms) if all(first[n] == second[n] for n in COUNTERS) else None

        m, scraped_ms = tail.wait_for("the counters to settle", settled, timeout_s=20)
        tail.poll(1.0)
    finally:
        tail.close()
        proc.stop()

    # Results as the worker sent them; every failure either requeued or bypassed.
    assert sent["ack"] > 0 and sent["nack"] > 0
    assert one(m, "tidemark_results_total", outcome="heartbeat") == 0
    bypasses = one(m, "tidemark_bypasses_total")
    assert bypasses == len(tail.values("bypassed", failing)) >= 1
    assert tail.values("bypassed", healthy) == []
    # Only the failing stream can have stale or duplicate (late, after a timeout) results.
    ignored = sum(by_label(m, "tidemark_ignored_total", "reason").values())
    failures = sent["nack"] - ignored + one(m, "tidemark_timeouts_total")
    assert one(m, "tidemark_requeues_total") + bypasses == failures
    assert one(m, "tidemark_requeues_total") >= 1
    # Every dispatch and commit on the topics, and a delay for every dispatch.
    assert one(m, "tidemark_tasks_dispatched_total") == len(tail.values("tasks"))
    delays = sum(by_label(m, "tidemark_dispatch_delay_seconds_count", "class").values())
    assert delays == len(tail.values("tasks"))
    assert one(m, "tidemark_commits_total") == len(tail.values("commits"))
    assert one(m, "tidemark_ack_to_commit_seconds_count") == sent["ack"]

    # Consumer lag rows for the coordinators' group (its inputs) and the workers' (tasks).
    rows = [dict(labels) | {"lag": v} for labels, v in m["tidemark_consumer_lag"].items()]
    coordinator_topics = {r["topic"] for r in rows if r["group"] == Topics(prefix).eos_group}
    assert {f"{prefix}.control", f"{prefix}.results"} <= coordinator_topics
    assert {r["topic"] for r in rows if r["group"] == workers} == {f"{prefix}.tasks"}
    assert all(r["lag"] >= 0 for r in rows)

    # Progress lag: the failing stream is the top laggard, behind by its real downstream_ms.
    top = by_label(m, "tidemark_progress_lag_top_seconds", "stream_id")
    assert max(top, key=lambda s: top[s]) == failing
    downstream_ms = tail.values("commits", failing)[-1]["downstream_ms"]
    assert downstream_ms > start
    assert top[failing] == pytest.approx((scraped_ms - downstream_ms) / 1000, abs=5)
    assert top[healthy] < 300
    assert one(m, "tidemark_streams_behind", threshold="300") == 1
    assert one(m, "tidemark_progress_lag_seconds_gcount") == 2
