"""Noticing a long-lived consumer that stopped making progress, so that it can be renewed.

A consumer that follows a topic for good (the worker's task consumer, a global table, the chaos
auditor) can stop delivering without an error: a librdkafka fetcher wedged after a broker
restart, a group member left without an assignment, a reading thread blocked. Nothing fails;
the reads just stop. `ProgressWatch` is the rule, pure (positions, end offsets and `now_ms`
are given, nothing is asked of a broker): the consumer is stalled when, for longer than
`bound_ms`,

- it has partitions whose end offset moved on since it last made progress while its position
  on them did not move (records it could read and does not), or
- it has no partition at all while it should have some (`expect_assignment`; for a group
  member, while it is out of its group by librdkafka's own statistics: `out_of_group`).

Only an end that moved counts: a read_committed consumer's position stops one short of the end
when the last record is a transaction marker (never delivered), and an end held back by an open
transaction (the last stable offset) is no fault of the consumer. The cost: a consumer that
stops right after a look that saw it progress, with records already waiting and none arriving
after, is not said; from one look those records cannot be told from a tail it cannot read (a
marker, an aborted transaction). The topics watched are written all along (tasks, `health`,
`commits` during a run), so the next record moves the end. A partition paused on purpose
(back-pressure) is left out by the caller.

`KafkaProgress` asks a consumer and an admin client for those facts, and the caller renews the
consumer (close, re-create, resume from committed offsets or its own positions) when told of a
stall, logging it at WARNING with the facts (`Stall.describe`).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec  # not re-exported for type checkers

from streams.kafka.member import Partition
from streams.kafka.settings import KafkaSettings

# How long a consumer may sit behind records it could read: well past a fetch's wait and a
# rebalance, short enough that a stall is said within the minute it began.
DEFAULT_STALL_BOUND_MS = 30_000
# How often the facts are gathered: each look costs a ListOffsets request.
DEFAULT_CHECK_EVERY_MS = 5_000
# The key of a DescribeCluster answer among the ends asked for (no partition has it).
_ANY_BROKER = "any broker"


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
            if end is None:
                continue
            seen = self._ends.get(tp)
            if seen is None:
                # Its end was not among those of the last progress (asked before a rebalance
                # gave it the partition): a baseline, not a move. An empty control partition,
                # taken for moved from nothing, made a coordinator "stalled" 30 s after a
                # rebalance (a fresh-clone make test).
                self._ends[tp] = end
            elif end > pos and end != seen:
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


def out_of_group(state: str, join_state: str) -> bool:
    """Whether a group member is out of its group, from librdkafka's statistics (`cgrp.state`,
    `cgrp.join_state`): in it only while `up` and `steady`. One in it may rightly have no
    partition (more members than partitions); one out of it for long is wedged."""
    return not (state == "up" and join_state == "steady")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class KafkaProgress:
    """Applies a ProgressWatch to a confluent-kafka consumer, from the consumer's own thread.

    Every `every_ms` it asks an admin client of its own for the assigned partitions' ends (last
    stable offsets) without waiting: the answer is taken at a later `check`, with the positions
    of then, so a check never blocks the consumer's loop, and a consumer wedged in its fetcher
    cannot hide behind its own cached watermarks. Positions read after the ends can only look
    further ahead, never stalled by mistake.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        bound_ms: int = DEFAULT_STALL_BOUND_MS,
        every_ms: int | None = None,
    ) -> None:
        self._settings = settings
        self.watch = ProgressWatch(bound_ms)
        # A few looks within the bound, so that a stall is said soon after it passes.
        self.every_ms = every_ms or min(DEFAULT_CHECK_EVERY_MS, max(100, bound_ms // 3))
        self._next_ms = 0
        self._admin: AdminClient | None = None
        self._asked: dict[Any, Future[Any]] | None = None  # the ends asked for
        self._asked_ms = 0

    def check(
        self,
        consumer: Consumer,
        *,
        paused: Collection[Partition] = (),
        all_paused: bool = False,
        expect_assignment: bool = True,
        group_state: tuple[str, str] | None = None,
        now_ms: int | None = None,
    ) -> Stall | None:
        """A Stall once the rule says so; None otherwise, and whenever the facts are missing (a
        broker that does not answer gives no verdict). `paused`: partitions paused on purpose
        (left out); `all_paused`: the whole assignment is. `group_state`: a group member's
        (state, join_state) from librdkafka's statistics; with no partition it is owed some
        only while it is out of its group (a member may rightly have none: more members than
        partitions)."""
        now = _now_ms() if now_ms is None else now_ms
        if self._asked is None and now < self._next_ms:
            return None
        if all_paused:  # nothing is to be read now: count afresh once it reads again
            self.renewed(now)
            return None
        try:
            assigned = [
                tp for tp in consumer.assignment() if (tp.topic, tp.partition) not in paused
            ]
            if self._asked is not None:
                expect = expect_assignment and not paused
                if group_state is not None:
                    expect = expect and out_of_group(*group_state)
                return self._answer(consumer, assigned, now, expect)
            if now >= self._next_ms:
                self._next_ms = now + self.every_ms
                self._ask(assigned, now)
        except (KafkaException, RuntimeError, ValueError):
            self._no_facts(now)
        return None

    def _no_facts(self, now_ms: int) -> None:
        """The broker did not answer: no verdict, and the bound counts again from its answer (a
        member rejoining after a broker restart is not stalled by the restart's length)."""
        self._asked = None
        self.watch.reset(now_ms)

    def _ask(self, assigned: list[TopicPartition], now_ms: int) -> None:
        # ListOffsets only. Two workers that also described their group (a request through the
        # group coordinator) both aborted in librdkafka 2.16 when the broker came back from a
        # restart ("rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0'"); the
        # member's group state comes from librdkafka's statistics instead.
        if self._admin is None:
            self._admin = AdminClient(self._settings.librdkafka(log_level=0))
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        request = {TopicPartition(tp.topic, tp.partition): latest for tp in assigned}
        if request:
            self._asked = self._admin.list_offsets(
                request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=10
            )
        else:
            # No partition to ask ends for: a broker's answer is still the fact a verdict
            # needs, or a member out of its group because every broker is gone would be
            # "stalled" and renewed every bound through an outage, to no avail.
            self._asked = {_ANY_BROKER: self._admin.describe_cluster(request_timeout=10)}
        self._asked_ms = now_ms

    def _answer(
        self, consumer: Consumer, assigned: list[TopicPartition], now_ms: int, expect: bool
    ) -> Stall | None:
        asked = self._asked or {}
        if not all(f.done() for f in asked.values()):
            if now_ms - self._asked_ms > 4 * self.every_ms:
                self._no_facts(now_ms)  # ask again at the next turn
            return None
        self._asked = None
        if any(f.exception() is not None for f in asked.values()):
            self._no_facts(now_ms)
            return None
        asked.pop(_ANY_BROKER, None)  # it answered: that was all it was asked for
        ends = {(tp.topic, tp.partition): f.result().offset for tp, f in asked.items()}
        positions = {
            (tp.topic, tp.partition): max(tp.offset, -1)  # -1: nothing read yet
            for tp in (consumer.position(assigned) if assigned else [])
        }
        return self.watch.observe(
            positions,
            {tp: end for tp, end in ends.items() if tp in positions},
            now_ms,
            expect_assignment=expect,
        )

    def renewed(self, now_ms: int | None = None) -> None:
        """The consumer was renewed (or paused whole): count afresh from the next look."""
        now = _now_ms() if now_ms is None else now_ms
        self.watch.reset(now)
        self._asked = None
        self._next_ms = now + self.every_ms
