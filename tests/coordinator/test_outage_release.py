"""How hard a recovered source is hit: the tasks per second its held streams send out when it
leaves outage (issue 25, defect 8), in-process over tests/coordinator/fakes.py.

`release_burst` plays a source S whose streams all fail from the start, their retries spread
over each minute (about `streams / 60` tasks a second), held once their budget (3 minutes) is
spent; at `recover_ms` S answers again: the tasks in flight then ack, which ends the outage,
and every held window waiting for its retry goes out at once (streams.core.outage.release: no
pacing without admission), or by a slow start with it (streams.coordinator.admission).
bench/outage_release_bench.py prints the figures for 600 streams.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import pairwise

from streams.coordinator.health import SourceHealth
from streams.coordinator.processor import Processor
from streams.core import OutagePolicy

from .fakes import T0, Driver, ack, at, delivery, nack

SECOND_MS = 1_000


@dataclass(frozen=True)
class Burst:
    streams: int
    held: int  # streams with a held window when S recovered
    before_per_s: float  # tasks a second during the outage, once every stream was held
    before_peak: int  # the most tasks one second dispatched then
    recovery_per_s: int  # the most tasks one second dispatched after S recovered (a tick step)
    release_steps: tuple[int, ...]  # tasks in each of the 10 s from the outage's end
    committed: int  # streams whose held window committed by the end
    released_twice: int  # held windows dispatched more than once in the second of recovery


def release_burst(streams: int = 600, transactional: bool = False, paced: bool = False) -> Burst:
    """`paced`: with admission (no limits set: the default slow start of a recovery)."""
    d = Driver(partitions=6, transactional=transactional)
    health = SourceHealth(OutagePolicy(), "c1", dict, publish_ms=1_000, stale_ms=30_000)
    d.processor = Processor(
        d.topics,
        6,
        d.store,
        d.emitter,
        d.flush_ms,
        replay_store=d.replay_store,
        monotonic_ms=lambda: d._last_now_ms,
        delivery=delivery(transactional),
        health=health,
        source_limits=(lambda: {}) if paced else None,
    )
    ids = [f"s-{i}" for i in range(streams)]
    d.processor.on_assigned(range(6))
    config = {"bypass_after_ms": 180_000, "source": "S"}  # fixed 60 s retries, 60 s windows
    created_ms = at(10, 0, 1)
    for i, stream_id in enumerate(ids):  # windows spread over a minute: their retries too
        d.upsert(stream_id, created_ms, start_ms=T0 + (i % 60) * SECOND_MS, **config)
    recover_ms = at(10, 6, 30)
    seen = 0
    per_step: list[tuple[int, int]] = []  # (now_ms, tasks that step)
    now_ms = created_ms
    held_at_recovery = 0
    ended_ms: int | None = None
    while now_ms < recover_ms + 90 * SECOND_MS:
        d._last_now_ms = now_ms
        d.processor.health_tick(now_ms)
        d.tick(now_ms)
        tasks = d.tasks()
        new = tasks[seen:]
        seen = len(tasks)
        per_step.append((now_ms, len(new)))
        if now_ms == recover_ms:
            held_at_recovery = health.outages[0].held if health.outages else 0
        if ended_ms is None and now_ms >= recover_ms and not health.outages:
            ended_ms = now_ms  # the outage guard saw S recover: the held windows go out
        for task in new:  # the worker answers at once: S down until recover_ms
            if now_ms < recover_ms:
                d.result(nack(task), now_ms)
            else:
                d.result(ack(task), now_ms)
        if transactional:
            d.checkpoint(now_ms)
        now_ms += SECOND_MS
    counts = Counter(
        (t["stream_id"], t["start_ms"])
        for t in d.tasks()
        if recover_ms <= t["dispatched_ms"] < recover_ms + SECOND_MS
    )
    held_since_ms = created_ms + 60 * SECOND_MS + 180_000  # every stream held by then
    held = [n for at_ms, n in per_step if held_since_ms <= at_ms < recover_ms]
    return Burst(
        streams=streams,
        held=held_at_recovery,
        before_per_s=sum(held) / len(held),
        before_peak=max(held),
        recovery_per_s=max(n for at_ms, n in per_step if at_ms >= recover_ms),
        released_twice=sum(1 for n in counts.values() if n > 1),
        release_steps=tuple(n for at_ms, n in per_step if ended_ms and at_ms >= ended_ms)[:10],
        committed=len({c["stream_id"] for c in d.commits()}),
    )


def test_a_recovered_source_gets_each_held_window_once_and_the_burst_is_measured() -> None:
    """Not a pace (there is none yet), a measure that must not grow: the figures printed, no
    held window sent twice, and no more tasks in the second of recovery than this scenario sent
    before issue 25's fixes: 300 in one tick step (the held windows waiting for their retry),
    against about 9 a second (peaks of 150) while held, as the issue saw (290 against 10)."""
    burst = release_burst(600)
    print(f"\n{burst}")  # the measure: pytest -s shows it
    assert burst.held == 600
    assert burst.released_twice == 0, burst
    assert burst.recovery_per_s <= 300, burst


def test_a_paced_recovery_starts_small_and_doubles_and_every_held_window_commits() -> None:
    """With admission (no limits set: the default pace_start of 4), the held windows go out by a
    slow start once the guard sees the source recover: 4 tasks at first (the acks of each
    second raise the level by one each), at most twice as many each next second,
    until every held window has gone out once and committed."""
    burst = release_burst(600, paced=True)
    print(f"\n{burst}")
    assert burst.held == 600
    assert burst.released_twice == 0, burst
    # steps[0] counts what the answers of the second before sent, before the guard knew
    steps = burst.release_steps[1:]
    assert steps[0] <= 8, burst  # 4 at the tick, 4 more as those 4 acked
    assert all(b <= 2 * a for a, b in pairwise(steps) if a), burst
    assert sum(steps) >= 300, burst  # the doubling reached every held window within 10 s
    assert burst.committed == 600, burst
