"""Noticing a long-lived consumer that stopped making progress, so that it can be renewed.

A consumer that follows a topic for good (the worker's task consumer, a global table, the chaos
auditor) can stop delivering without an error: a librdkafka fetcher wedged after a broker
restart, a group member left without an assignment, a reading thread blocked. Nothing fails;
the reads just stop. `ProgressWatch` is the rule, pure (positions, end offsets and `now_ms`
are given, nothing is asked of a broker): the consumer is stalled when, for longer than
`bound_ms`,

- it has partitions whose end offset moved on since it last made progress while its position
  on them did not move (records it could read and does not), or
- it has no partition at all while it should have some (`expect_assignment`).

Only an end that moved counts: a read_committed consumer's position stops one short of the end
when the last record is a transaction marker (never delivered), and an end held back by an open
transaction (the last stable offset) is no fault of the consumer. A partition paused on purpose
(back-pressure) is left out by the caller.

`KafkaProgress` asks a consumer and an admin client for those facts, and the caller renews the
consumer (close, re-create, resume from committed offsets or its own positions) when told of a
stall, logging it at WARNING with the facts (`Stall.describe`).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

from streams.kafka.settings import KafkaSettings
from streams.kafka.topic_io import watermarks

Partition = tuple[str, int]

# How long a consumer may sit behind records it could read: well past a fetch's wait and a
# rebalance, short enough that a stall is said within the minute it began.
DEFAULT_STALL_BOUND_MS = 30_000
# How often the facts are gathered: each look costs a ListOffsets request.
DEFAULT_CHECK_EVERY_MS = 5_000


@dataclass(frozen=True, slots=True)
class Stall:
    """What a stalled consumer looked like: the partitions it sits behind on, (position, end)."""

    idle_ms: int
    behind: Mapping[Partition, tuple[int, int]]
    unassigned: bool = False

    def describe(self) -> str:
        if self.unassigned:
            return f"no partition assigned for {self.idle_ms} ms"
        parts = ", ".join(
            f"{t}[{p}] at {pos} of {end}" for (t, p), (pos, end) in sorted(self.behind.items())
        )
        return f"no progress for {self.idle_ms} ms while records wait: {parts}"


@dataclass(slots=True)
class ProgressWatch:
    """The stall rule over successive looks at a consumer (see the module's docstring)."""

    bound_ms: int = DEFAULT_STALL_BOUND_MS
    _positions: dict[Partition, int] = field(default_factory=dict)
    _ends: dict[Partition, int] = field(default_factory=dict)  # the ends at the last progress
    _progress_ms: int | None = None
    _moved_ms: dict[Partition, int] = field(default_factory=dict)  # when its end first moved on

    def observe(
        self,
        positions: Mapping[Partition, int],
        ends: Mapping[Partition, int],
        now_ms: int,
        *,
        expect_assignment: bool = True,
    ) -> Stall | None:
        """One look: each assigned partition's position (the next offset it will read) and end
        (what it can reach: the last stable offset under read_committed). A Stall, or None."""
        if self._progress_ms is None or dict(positions) != self._positions:
            self.reset(now_ms, positions, ends)
            return None
        idle_ms = now_ms - self._progress_ms
        if not positions:
            unassigned = expect_assignment and idle_ms >= self.bound_ms
            return Stall(idle_ms, {}, unassigned=True) if unassigned else None
        if not any(ends.get(tp, 0) > pos for tp, pos in positions.items()):
            self.reset(now_ms, positions, ends)  # caught up: idle, not stalled
            return None
        for tp, pos in positions.items():
            end = ends.get(tp)
            if end is not None and end > pos and end != self._ends.get(tp):
                self._moved_ms.setdefault(tp, now_ms)  # records it has not read since then
        behind = {
            tp: (positions[tp], ends[tp])
            for tp, moved_ms in self._moved_ms.items()
            if tp in ends and now_ms - moved_ms >= self.bound_ms
        }
        return Stall(idle_ms, behind) if behind else None

    def reset(
        self,
        now_ms: int,
        positions: Mapping[Partition, int] | None = None,
        ends: Mapping[Partition, int] | None = None,
    ) -> None:
        """Count from `now_ms` (after a renewal, or on progress)."""
        self._progress_ms = now_ms
        self._positions = dict(positions or {})
        self._ends = dict(ends or {})
        self._moved_ms = {}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class KafkaProgress:
    """Gathers a consumer's positions and its partitions' ends every `every_ms` and applies a
    ProgressWatch. Call `check` from the consumer's own thread (librdkafka's position() is
    per client, but the caller knows which partitions it paused)."""

    def __init__(
        self,
        settings: KafkaSettings,
        bound_ms: int = DEFAULT_STALL_BOUND_MS,
        every_ms: int = DEFAULT_CHECK_EVERY_MS,
    ) -> None:
        self._settings = settings
        self.watch = ProgressWatch(bound_ms)
        self.every_ms = every_ms
        self._next_ms = 0
        self._admin: AdminClient | None = None

    def check(
        self,
        consumer: Consumer,
        *,
        paused: Collection[Partition] = (),
        expect_assignment: bool = True,
        now_ms: int | None = None,
    ) -> Stall | None:
        now = _now_ms() if now_ms is None else now_ms
        if now < self._next_ms:
            return None
        self._next_ms = now + self.every_ms
        try:
            assigned = [
                tp for tp in consumer.assignment() if (tp.topic, tp.partition) not in paused
            ]
            if self._admin is None:
                self._admin = AdminClient(self._settings.librdkafka(log_level=0))
            topics = {tp.topic for tp in assigned}
            marks = watermarks(self._admin, topics, 5.0) if topics else {}
            positions = {
                # Nothing read yet (an invalid position): it reads from the start.
                (tp.topic, tp.partition): tp.offset if tp.offset >= 0 else low
                for tp in consumer.position(assigned)
                for low, _ in [marks.get((tp.topic, tp.partition), (0, 0))]
            }
            ends = {tp: end for tp, (_, end) in marks.items() if tp in positions}
        except (KafkaException, TimeoutError, RuntimeError):
            return None  # the broker did not answer: no facts, no verdict
        expect = expect_assignment and not paused
        return self.watch.observe(positions, ends, now, expect_assignment=expect)

    def renewed(self, now_ms: int | None = None) -> None:
        """The consumer was renewed: count afresh."""
        self.watch.reset(_now_ms() if now_ms is None else now_ms)
        self._next_ms = 0
