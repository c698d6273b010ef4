"""A tick with a limit (the confluent engine's budget per loop step): the earliest due streams
are handled, the others stay due and go out at the next tick, each window exactly once."""

from __future__ import annotations

from collections import Counter

from .fakes import Driver, at

STREAMS = 60


def backlog() -> tuple[Driver, int]:
    """60 streams whose first window ends at 10:01, none dispatched yet; the partition with
    the most of them."""
    d = Driver(transactional=True)
    ids = [f"cluster-{i}" for i in range(STREAMS)]
    d.assign(*ids)
    for sid in ids:
        d.upsert(sid, at(10, 0, 30))
    assert d.tasks() == []
    partition, _ = Counter(d.partition(s) for s in ids).most_common(1)[0]
    return d, partition


def test_a_limited_tick_handles_that_many_and_leaves_the_rest_due() -> None:
    d, p = backlog()
    now = at(10, 1)
    assert p in d.processor.partitions_to_tick(now)
    assert d.processor.on_tick(p, now, limit=3) == 3
    d.checkpoint(now)
    assert len(d.tasks()) == 3
    assert p in d.processor.partitions_to_tick(now)  # the rest is still due
    left = d.processor.on_tick(p, now)
    d.checkpoint(now)
    owned = [t for t in d.tasks() if d.partition(t["stream_id"]) == p]
    assert left == len(owned) - 3 > 0
    assert len({t["stream_id"] for t in owned}) == len(owned)  # each window once
    assert d.processor.on_tick(p, now) == 0


def test_ticks_of_a_budget_dispatch_every_due_window_once() -> None:
    d, _ = backlog()
    now = at(10, 1)
    for _ in range(STREAMS):
        due = d.processor.partitions_to_tick(now)
        handled = [d.processor.on_tick(p, now, limit=2) for p in due]
        if not any(handled):
            break
        d.checkpoint(now)
    started = Counter(t["stream_id"] for t in d.tasks())
    assert len(started) == STREAMS and set(started.values()) == {1}
