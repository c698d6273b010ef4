"""The outage guard across partitions and coordinators: SourceHealth, and the Processor with it.

No broker: the `health` topic is played by a dict that the emitted health messages fill, as
the global table fills it from the topic (its broker test: tests/kafka/test_global_table.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from streams.coordinator.health import SourceHealth
from streams.coordinator.processor import Processor
from streams.core import OutagePolicy, SourceCounts, StreamConfig, create_state
from streams.wire import HealthMessage, SourceCountsModel, decode_health, health_key

from .fakes import T0, Driver, ack, at, delivery, nack

BOTH_ENGINES = pytest.mark.parametrize("transactional", [False, True], ids=["faust", "confluent"])
S_STREAMS = ("s-1", "s-2", "s-3", "s-4")
CONFIG = {"bypass_after_ms": 180_000, "source": "S"}  # fixed 60 s retries, 60 s windows


class Topic:
    """The `health` topic read whole: the latest entry per key, fed by the emitters."""

    def __init__(self) -> None:
        self.entries: dict[bytes, HealthMessage] = {}
        self.caught_up = True  # whether a reader has read it to its end (GlobalTable.caught_up)

    def read_up(self) -> bool:
        return self.caught_up

    def read(self, *drivers: Driver) -> None:
        for d in drivers:
            for sent in d.emitter.on(d.topics.health):
                entry = decode_health(sent.key, sent.value)
                assert entry is not None
                self.entries[sent.key] = entry

    def view(self) -> dict[bytes, HealthMessage]:
        return dict(self.entries)


def guarded(
    topic: Topic,
    partitions: int = 1,
    transactional: bool = False,
    owner: str = "c1",
    over: Driver | None = None,
) -> Driver:
    """A Driver whose Processor has an outage guard over `topic` (published every second).
    `over`: a restart of that driver (the same store; nothing in memory survives)."""
    d = (
        Driver(partitions=partitions, transactional=transactional)
        if over is None
        else over.restart()
    )
    health = SourceHealth(
        OutagePolicy(),
        owner,
        topic.view,
        publish_ms=1_000,
        stale_ms=30_000,
        caught_up=topic.read_up,
    )
    d.processor = Processor(
        d.topics,
        partitions,
        d.store,
        d.emitter,
        d.flush_ms,
        replay_store=d.replay_store,
        monotonic_ms=lambda: d._last_now_ms,
        delivery=delivery(transactional),
        health=health,
    )
    return d


def latest(d: Driver, stream_id: str) -> dict[str, Any]:
    tasks = [t for t in d.tasks() if t["stream_id"] == stream_id]
    return max(tasks, key=lambda t: (t["start_ms"], t["attempt"]))


def step(d: Driver, topic: Topic, now_ms: int) -> None:
    """What an engine does each loop: the guard's work, ticks, and (eos) the commit."""
    d._last_now_ms = now_ms
    d.processor.health_tick(now_ms)
    topic.read(d)
    d.processor.health_tick(now_ms)  # decide from the view that includes its own entries
    d.tick(now_ms)


def start(d: Driver, topic: Topic, streams: tuple[str, ...], **config: Any) -> None:
    for stream_id in streams:
        d.upsert(stream_id, at(10, 0, 30), **config)
    d.processor.on_assigned(range(d.partitions))
    step(d, topic, at(10, 0, 30))
    step(d, topic, at(10, 1))


def fail_all(d: Driver, streams: tuple[str, ...], now_ms: int) -> None:
    for stream_id in streams:
        d.result(nack(latest(d, stream_id)), now_ms)


def bypassed_streams(d: Driver) -> set[str]:
    return {s.json()["stream_id"] for s in d.bypassed()}


# -- SourceHealth on its own -----------------------------------------------------------------------


def _state(stream_id: str, source: str | None, failing: bool) -> Any:
    state = create_state(StreamConfig(stream_id, T0, source=source), T0 + 60_000).state
    assert state is not None
    if failing:
        state.windows[0].first_failed_ms = T0 + 60_000
    return state


def test_counts_follow_each_streams_latest_state() -> None:
    health = SourceHealth(OutagePolicy(), "c1")
    health.note(0, "a", _state("a", "S", True))
    health.note(0, "b", _state("b", "S", False))
    health.note(1, "c", _state("c", "S", True))
    health.note(1, "d", _state("d", None, True))  # no source: counted nowhere
    health.built({0, 1})
    assert health.totals(T0) == {"S": SourceCounts(2, 3)}
    health.note(0, "a", _state("a", "S", False))
    health.note(1, "c", None)  # deleted
    assert health.totals(T0) == {"S": SourceCounts(0, 2)}
    health.note(0, "b", _state("b", "R", True))  # moved to another source
    assert health.totals(T0) == {"S": SourceCounts(0, 1), "R": SourceCounts(1, 1)}


def test_partitions_not_built_or_forgotten_are_not_counted_from_memory() -> None:
    health = SourceHealth(OutagePolicy(), "c1")
    health.note(0, "a", _state("a", "S", True))
    assert health.totals(T0) == {}
    health.built({0})
    assert health.totals(T0) == {"S": SourceCounts(1, 1)}
    health.forget({0})
    assert health.totals(T0) == {}


def _entry(partition: int, published_ms: int, failing: int, total: int) -> HealthMessage:
    counts = SourceCountsModel(failing=failing, total=total)
    return HealthMessage(
        partition=partition, owner="c2", published_ms=published_ms, sources={"S": counts}
    )


def test_other_partitions_count_from_their_fresh_entries_and_stale_ones_expire() -> None:
    view = {health_key(1): _entry(1, T0, 3, 4), health_key(0): _entry(0, T0, 9, 9)}
    health = SourceHealth(OutagePolicy(), "c1", lambda: view, stale_ms=30_000)
    health.note(0, "a", _state("a", "S", False))
    health.built({0})
    # partition 0 is this coordinator's: its live counts, not the published entry
    assert health.totals(T0 + 29_999) == {"S": SourceCounts(3, 5)}
    assert health.totals(T0 + 30_000) == {"S": SourceCounts(0, 1)}  # partition 1's expired


def test_a_dead_owners_counts_from_before_an_outage_delay_it_until_they_are_stale() -> None:
    """The bound docs/concepts.md states (seen in a chaos run, seed 121983): an owner SIGKILLed
    as its source goes down leaves entries from before (none failing), and they keep the
    source's share of failing streams under `outage_ratio` until they are `stale_ms` old; so
    the guard learns of the outage up to `stale_ms` (plus a takeover) after it began, and a
    budget shorter than that may run out first."""
    view = {health_key(1): _entry(1, T0, 0, 7)}  # the dead owner's last entry, before failures
    health = SourceHealth(OutagePolicy(), "c1", lambda: view, stale_ms=20_000)
    for stream in ("a", "b", "c", "d", "e"):  # every stream of this coordinator's fails
        health.note(0, stream, _state(stream, "S", True))
    health.built({0})
    health.refresh(T0 + 19_999)
    assert health.totals(T0 + 19_999) == {"S": SourceCounts(5, 12)} and health.outages == []
    health.refresh(T0 + 20_000)  # the entry is stale: only what is known counts
    assert [(o.source, o.failing, o.total) for o in health.outages] == [("S", 5, 5)]


def test_refresh_tracks_outages_and_returns_held_streams_when_one_ends() -> None:
    view = {health_key(1): _entry(1, T0, 3, 3)}
    health = SourceHealth(OutagePolicy(), "c1", lambda: view)
    held = _state("a", "S", True)
    held.windows[0].held_since_ms = T0 + 60_000
    health.note(0, "a", held)
    health.built({0})
    assert health.refresh(T0) == []
    (outage,) = health.outages
    assert (outage.source, outage.failing, outage.total, outage.since_ms, outage.held) == (
        "S",
        4,
        4,
        T0,
        1,
    )
    assert health.hold_ms(held) == OutagePolicy().max_hold_ms
    assert health.refresh(T0 + 5_000) == [] and health.outages[0].since_ms == T0
    view[health_key(1)] = _entry(1, T0 + 6_000, 0, 3)
    assert health.refresh(T0 + 6_000) == [(0, "a")]
    assert health.outages == [] and health.hold_ms(held) == 0


def test_until_it_knows_the_guard_holds_every_sourced_stream_and_releases_nothing() -> None:
    """Issue 25, defect 6: the guard knows a source's state only once its partitions are
    rebuilt and `health` is read to its end; before, every stream naming a source is held."""
    read = {"up": False}
    health = SourceHealth(OutagePolicy(), "c1", dict, stale_ms=30_000, caught_up=lambda: read["up"])
    held = _state("a", "S", True)
    held.windows[0].held_since_ms = T0
    none = _state("n", None, True)
    health.expect({0, 1})
    assert not health.known
    assert health.hold_ms(held) == OutagePolicy().max_hold_ms and health.hold_ms(none) == 0
    health.note(0, "a", held)
    health.built({0})
    assert health.refresh(T0) == [] and not health.known  # partition 1 not rebuilt yet
    health.built({1})
    assert health.refresh(T0 + 1) == [] and not health.known  # `health` not read yet
    read["up"] = True
    # 1 failing of 1: no outage; the stream held while nobody knew is released at once
    assert health.refresh(T0 + 2) == [(0, "a")]
    assert health.known and health.hold_ms(held) == 0
    health.expect({2})  # a new partition: unknown again until it is rebuilt
    assert not health.known and health.hold_ms(held) > 0
    assert health.refresh(T0 + 3) == []


def test_a_health_topic_never_read_stops_the_wait_stale_ms_after_the_rebuild() -> None:
    health = SourceHealth(OutagePolicy(), "c1", dict, stale_ms=30_000, caught_up=lambda: False)
    health.expect({0})
    health.refresh(T0)  # not rebuilt: the bound does not start
    health.built({0})
    health.refresh(T0 + 60_000)
    health.refresh(T0 + 89_999)
    assert not health.known
    health.refresh(T0 + 90_000)
    assert health.known


def test_entries_are_published_per_built_partition_once_per_interval() -> None:
    health = SourceHealth(OutagePolicy(), "c1", publish_ms=1_000)
    health.note(2, "a", _state("a", "S", True))
    health.built({2, 3})
    first = health.entries(T0)
    assert [key for key, _ in first] == [b"2", b"3"]
    entry = decode_health(*first[0])
    assert entry is not None and entry.sources["S"] == SourceCountsModel(failing=1, total=1)
    assert (entry.owner, entry.published_ms) == ("c1", T0)
    empty = decode_health(*first[1])
    assert empty is not None and empty.sources == {}  # replaces what a dead owner left
    assert health.entries(T0 + 999) == []
    assert len(health.entries(T0 + 1_000)) == 2


# -- the Processor with the guard ------------------------------------------------------------------


@BOTH_ENGINES
def test_streams_of_a_source_failing_together_are_held_and_a_lone_one_is_bypassed(
    transactional: bool,
) -> None:
    topic = Topic()
    d = guarded(topic, transactional=transactional)
    start(d, topic, S_STREAMS, **CONFIG)
    start(d, topic, ("r-1",), bypass_after_ms=180_000, source="R")
    for minute in range(1, 10):  # every attempt fails, a minute apart
        if minute > 1:
            step(d, topic, at(10, minute, 5))
        fail_all(d, (*S_STREAMS, "r-1"), at(10, minute, 5))
        step(d, topic, at(10, minute, 6))
    assert bypassed_streams(d) == {"r-1"}  # at 10:04:05, three minutes after its first failure
    (outage,) = d.processor.health.outages  # type: ignore[union-attr]
    assert (outage.source, outage.failing, outage.total, outage.held) == ("S", 4, 4, 4)
    assert {t["attempt"] for t in d.tasks() if t["stream_id"] == "s-1"} == set(range(1, 10))
    health = [e for e in topic.entries.values() if e.sources]
    assert health and health[0].sources["S"] == SourceCountsModel(
        failing=4, total=4, outage_since_ms=at(10, 1, 6)
    )


@BOTH_ENGINES
def test_on_recovery_held_windows_go_out_at_once_and_commit_with_held_ms(
    transactional: bool,
) -> None:
    topic, d = _held_outage(transactional)
    # held since 10:04:05; the source comes back: two streams ack their retries
    step(d, topic, at(10, 6, 5))
    fail_all(d, ("s-3", "s-4"), at(10, 6, 6))  # these two wait for their retry at 10:07:06
    for stream_id in ("s-1", "s-2"):
        d.result(ack(latest(d, stream_id)), at(10, 6, 7))
    d.emitter.clear()
    step(d, topic, at(10, 6, 8))  # 2 of 4 failing: no outage; s-3 and s-4 are released
    released = {t["stream_id"]: t for t in d.tasks()}
    assert set(released) == {"s-3", "s-4"}
    assert {t["dispatched_ms"] for t in released.values()} == {at(10, 6, 8)}
    for stream_id in ("s-3", "s-4"):
        d.result(ack(latest(d, stream_id)), at(10, 6, 9))
    step(d, topic, at(10, 6, 10))
    if transactional:
        d.checkpoint(at(10, 6, 10))
    commits = {c["stream_id"]: c["windows"][0] for c in d.commits()}
    assert commits["s-3"]["reason"] == "ack"
    assert commits["s-3"]["held_ms"] == at(10, 6, 9) - at(10, 4, 5)
    assert d.bypassed() == []


def test_the_view_crosses_coordinators_and_a_dead_ones_counts_expire() -> None:
    topic = Topic()
    one = guarded(topic, partitions=2, owner="c1")
    two = guarded(topic, partitions=2, owner="c2")
    streams = ("s-1", "s-2", "s-3", "s-4", "s-5", "s-6")
    by_partition = {p: tuple(s for s in streams if one.partition(s) == p) for p in (0, 1)}
    assert all(len(group) >= 2 for group in by_partition.values())
    for d, p in ((one, 0), (two, 1)):
        for stream_id in by_partition[p]:
            d.upsert(stream_id, at(10, 0, 30), **CONFIG)
        d.processor.on_assigned([p])

    def both(now_ms: int) -> None:
        for d in (one, two):
            d._last_now_ms = now_ms
            d.processor.health_tick(now_ms)
        topic.read(one, two)
        for d in (one, two):
            d.processor.health_tick(now_ms)
            d.tick(now_ms)

    both(at(10, 0, 30))
    both(at(10, 1))
    for minute in range(1, 6):
        if minute > 1:
            both(at(10, minute, 5))
        for d, p in ((one, 0), (two, 1)):
            fail_all(d, by_partition[p], at(10, minute, 5))
        both(at(10, minute, 6))
    assert one.bypassed() == [] and two.bypassed() == []
    for d in (one, two):
        (outage,) = d.processor.health.outages  # type: ignore[union-attr]
        assert (outage.failing, outage.total) == (6, 6)
    # coordinator two dies: its entry still counts, so the hold survives ...
    one.emitter.clear()
    one._last_now_ms = at(10, 5, 35)
    one.processor.health_tick(at(10, 5, 35))
    topic.read(one)
    one.processor.health_tick(at(10, 5, 35))
    assert one.processor.health.outages[0].total == 6  # type: ignore[union-attr]
    # ... until it is 30 s old (published at 10:05:06): then only the live partition counts
    one.processor.health_tick(at(10, 5, 36))
    health = one.processor.health
    assert health is not None
    assert health.totals(at(10, 5, 36)) == {"S": SourceCounts(2, 2)}
    assert health.outages == []  # 2 failing: fewer than outage_min_streams


def test_the_metrics_show_sources_in_outage_streams_held_and_the_hold_duration() -> None:
    topic = Topic()
    d = guarded(topic)
    registry = d.processor.metrics.registry
    assert registry.get_sample_value("tidemark_sources_in_outage") == 0
    start(d, topic, S_STREAMS, **CONFIG)
    for minute in range(1, 6):
        if minute > 1:
            step(d, topic, at(10, minute, 5))
        fail_all(d, S_STREAMS, at(10, minute, 5))
        step(d, topic, at(10, minute, 6))
    assert registry.get_sample_value("tidemark_sources_in_outage") == 1
    labels = {"source": "S"}
    assert registry.get_sample_value("tidemark_outage_failing_streams", labels) == 4
    assert registry.get_sample_value("tidemark_outage_streams", labels) == 4
    assert registry.get_sample_value("tidemark_streams_held", labels) == 4
    held_s = registry.get_sample_value("tidemark_outage_hold_seconds", labels)
    assert held_s is not None and held_s > 0  # on the wall clock, since 10:01:06 of 2026-11-29


def test_held_streams_are_counted_as_they_change_and_leave_with_their_partition() -> None:
    view = {health_key(1): _entry(1, T0, 3, 3)}
    health = SourceHealth(OutagePolicy(), "c1", lambda: view)
    held = _state("a", "S", True)
    held.windows[0].held_since_ms = T0
    health.note(0, "a", held)
    health.note(0, "b", _state("b", "S", True))
    health.built({0})
    health.refresh(T0)
    assert health.outages[0].held == 1
    health.forget({0})
    health.refresh(T0 + 1)
    assert health.outages[0].held == 0  # partition 1's 3 of 3 are still an outage
    view[health_key(1)] = _entry(1, T0 + 2, 3, 3)
    health.note(0, "a", held)
    health.built({0})
    health.refresh(T0 + 2)
    assert health.outages[0].held == 1 and health.outages[0].failing == 4


@BOTH_ENGINES
def test_paused_failing_streams_do_not_keep_their_source_in_outage(transactional: bool) -> None:
    """Three of six streams of S fail once and are paused; an hour later a fourth fails alone
    and is bypassed on time (issue 25, defect 7: the paused three counted as failing for good,
    so the fourth was held)."""
    topic = Topic()
    d = guarded(topic, transactional=transactional)
    six = tuple(f"s-{i}" for i in range(1, 7))
    start(d, topic, six, **CONFIG)
    fail_all(d, six[:3], at(10, 1, 5))
    for stream_id in six[:3]:
        d.control({"type": "pause", "stream_id": stream_id}, at(10, 1, 6))
    for stream_id in six[3:]:
        d.result(ack(latest(d, stream_id)), at(10, 1, 6))
    step(d, topic, at(10, 1, 7))
    health = d.processor.health
    assert health is not None and health.outages == []  # 0 failing of 6: paused ones left out
    now_ms = at(11, 1)
    step(d, topic, now_ms)  # the fourth's next window (the hour's windows, one at a time)
    lone = "s-4"
    first_ms = now_ms
    while not any(b.json()["stream_id"] == lone for b in d.bypassed()):
        assert now_ms - first_ms < 3 * CONFIG["bypass_after_ms"], "held, not bypassed"
        for stream_id in six[3:]:
            task = latest(d, stream_id)
            if stream_id == lone:
                d.result(nack(task), now_ms)
            elif task["start_ms"] >= at(10, 1):  # the others ack theirs
                d.result(ack(task), now_ms)
        now_ms += 60_000
        step(d, topic, now_ms)
    assert health.outages == []
    (record,) = [b.json() for b in d.bypassed() if b.json()["stream_id"] == lone]
    assert record["bypassed_ms"] - record["first_failed_ms"] < CONFIG["bypass_after_ms"] + 60_000


def _held_outage(transactional: bool) -> tuple[Topic, Driver]:
    """Four streams of S failing together since 10:01:05, held since 10:04:05 (their budget is
    three minutes), the last retries dispatched at 10:05:05 and failed at once."""
    topic = Topic()
    d = guarded(topic, transactional=transactional)
    start(d, topic, S_STREAMS, **CONFIG)
    for minute in range(1, 6):
        if minute > 1:
            step(d, topic, at(10, minute, 5))
        fail_all(d, S_STREAMS, at(10, minute, 5))
        step(d, topic, at(10, minute, 6))
    health = d.processor.health
    assert health is not None and [o.held for o in health.outages] == [4]
    step(d, topic, at(10, 6, 5))  # the next retries go out; the coordinator dies with them
    assert {latest(d, s)["dispatched_ms"] for s in S_STREAMS} == {at(10, 6, 5)}
    return topic, d


@BOTH_ENGINES
@pytest.mark.parametrize("first", ["results", "tick"])
def test_a_restart_longer_than_the_stale_time_bypasses_no_held_window(
    transactional: bool, first: str
) -> None:
    """Issue 25, defect 6: the coordinator is down 65 s (its own last counts are stale by then).
    Whether the first thing the new process handles is a batch of results (the nacks its
    predecessor never read) or its first tick (a passed deadline), nothing of S is bypassed:
    the guard decides nothing until it has rebuilt its partitions and read `health` (and then
    it counts the four failing streams itself); then recovery commits every held window."""
    topic, old = _held_outage(transactional)
    d = guarded(topic, transactional=transactional, over=old)
    topic.caught_up = False  # the new process's reader has not reached the end of `health` yet
    back_ms = at(10, 7, 10)  # 65 s after the last counts were published
    d.processor.on_assigned([0])
    tasks = {s: latest(old, s) for s in S_STREAMS}
    if first == "results":
        for task in tasks.values():  # every nack waiting in `results`, in one batch
            d.result(nack(task), back_ms)
    step(d, topic, back_ms)
    assert d.bypassed() == [], "a held window bypassed before the guard knew the source"
    topic.caught_up = True
    now_ms = back_ms
    for _ in range(5):  # the guard knows now: S is in outage, and holding goes on
        now_ms += 60_000
        step(d, topic, now_ms)
        for stream_id in S_STREAMS:
            task = latest(d, stream_id)
            if task["dispatched_ms"] > back_ms - 60_000:
                d.result(nack(task), now_ms)
        step(d, topic, now_ms + 1)
    assert d.bypassed() == []
    health = d.processor.health
    assert health is not None
    (outage,) = health.outages
    assert (outage.failing, outage.total, outage.held) == (4, 4, 4)
    for stream_id in S_STREAMS:  # the source is back
        step(d, topic, now_ms + 60_000)
        task = latest(d, stream_id)
        if task["dispatched_ms"] >= now_ms:
            d.result(ack(task), now_ms + 60_000)
    for offset_ms in (60_001, 60_002, 120_000, 120_001):
        step(d, topic, now_ms + offset_ms)
        for stream_id in S_STREAMS:
            task = latest(d, stream_id)
            if task["start_ms"] == T0 and task["dispatched_ms"] >= now_ms + 60_000:
                d.result(ack(task), now_ms + offset_ms)
    if transactional:
        d.checkpoint(now_ms + 120_002)
    firsts = {
        c["stream_id"]: c["windows"][0] for c in d.commits() if c["windows"][0]["start_ms"] == T0
    }
    assert set(firsts) == set(S_STREAMS)
    assert {w["reason"] for w in firsts.values()} == {"ack"}
    assert all(w["held_ms"] > 0 for w in firsts.values())
    assert d.bypassed() == []


@BOTH_ENGINES
def test_a_failure_of_an_attempt_sent_during_the_outage_does_not_bypass_after_recovery(
    transactional: bool,
) -> None:
    """The flaky broker test's cause (issue 25): S recovers, two streams' acks end the outage,
    and then the nack another stream's worker sent while S was still down (results of other
    partitions come in any order), or the deadline of a task a lagging worker never answered,
    is decided with the source no longer in outage: its budget spent, the held window was
    bypassed though it never failed after the recovery. A failure counts against a released
    window only for an attempt dispatched after its source recovered."""
    topic = Topic()
    d = guarded(topic, transactional=transactional)
    start(d, topic, S_STREAMS, **CONFIG)
    for minute in range(1, 6):
        if minute > 1:
            step(d, topic, at(10, minute, 5))
        fail_all(d, S_STREAMS, at(10, minute, 5))
        step(d, topic, at(10, minute, 6))
    step(d, topic, at(10, 6, 5))  # every held window's retry goes out while S is down
    in_flight = {s: latest(d, s) for s in S_STREAMS}
    assert {t["dispatched_ms"] for t in in_flight.values()} == {at(10, 6, 5)}
    for stream_id in ("s-1", "s-2"):  # S is back: these two ack
        d.result(ack(in_flight[stream_id]), at(10, 6, 6))
    step(d, topic, at(10, 6, 7))  # 2 of 4 failing: the outage is over
    health = d.processor.health
    assert health is not None and health.outages == []
    d.result(nack(in_flight["s-3"]), at(10, 6, 8))  # sent while S was down, read late
    step(d, topic, at(10, 7, 6))  # s-4's task: its deadline (a minute) passed unanswered
    assert d.bypassed() == [], "a failure from the outage bypassed a released window"
    for _ in range(2):  # their retries go out after the recovery, and ack
        step(d, topic, at(10, 8, 10))
        for stream_id in ("s-3", "s-4"):
            task = latest(d, stream_id)
            if task["start_ms"] == T0 and task["dispatched_ms"] > at(10, 6, 7):
                d.result(ack(task), at(10, 8, 11))
    step(d, topic, at(10, 8, 12))
    if transactional:
        d.checkpoint(at(10, 8, 12))
    firsts = {
        c["stream_id"]: c["windows"][0] for c in d.commits() if c["windows"][0]["start_ms"] == T0
    }
    assert {s: w["reason"] for s, w in firsts.items()} == dict.fromkeys(S_STREAMS, "ack")
    assert d.bypassed() == []
