"""The replay lane's share of the chaos audit: what a `replayed` window on `commits` must rest on.

`Auditor._commits` walks each stream's chain with its `replayed` commits in it (their
previous_ms is the chain's mark, their downstream_ms does not move, and each of their windows
was committed as a bypass earlier in the same incarnation). Here, from `tasks` and `results`:

- a `replayed` window was acked whole (`ack_ms == end_ms`) by a replay task of the stream's
  current incarnation, dispatched before the commit, the ack naming that task's attempt and
  incarnation;
- a replay task's id is never the id of a live task of the same incarnation (a late result of
  one would be taken for the other).

A stream's incarnation is the number its coordinator stamps on tasks (`incarnation_of`); the run
knows incarnations only by when it created them, so each plan incarnation's number is read off
the live tasks dispatched while it was the current one.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .auditor import Audit, Seen, StreamPlan

Window = tuple[str, int, int]  # stream, start_ms, end_ms


@dataclass(frozen=True)
class ReplayedCommit:
    """One window of a `replayed` commit, where the chain walk found it."""

    stream_id: str
    index: int  # the plan incarnation (0-based) the chain was in
    start_ms: int
    end_ms: int
    committed_ms: int
    where: str


def _loads(raw: bytes | None) -> Any:
    try:
        return None if raw is None else json.loads(raw)
    except ValueError:
        return None


class ReplayAudit:
    def __init__(self, plans: dict[str, StreamPlan], tasks: list[Seen], results: list[Seen]):
        self.plans = plans
        self.live_ids: set[tuple[str, Any]] = set()
        self.replay_tasks: dict[Window, list[dict[str, Any]]] = defaultdict(list)
        self.numbers: dict[tuple[str, int], set[Any]] = defaultdict(set)
        for rec in tasks:
            task = _loads(rec.value)
            if not isinstance(task, dict) or task.get("stream_id") not in plans:
                continue
            sid = task["stream_id"]
            if task.get("replay"):
                self.replay_tasks[(sid, task["start_ms"], task["end_ms"])].append(task)
            else:
                self.live_ids.add((task["task_id"], task.get("incarnation")))
                self.numbers[(sid, self._index(sid, task["dispatched_ms"]))].add(
                    task.get("incarnation")
                )
        # (stream, start, end, attempt) -> the incarnations and ack_ms of its acks
        self.acks: dict[tuple[str, int, int, int], list[tuple[Any, Any]]] = defaultdict(list)
        for rec in results:
            res = _loads(rec.value)
            try:
                if res.get("outcome") == "ack":
                    key = (res["stream_id"], res["start_ms"], res["end_ms"], res["attempt"])
                    self.acks[key].append((res.get("incarnation"), res.get("ack_ms")))
            except (AttributeError, KeyError, TypeError):
                continue  # the fuzz burst's results
        self.replay_tasks_seen = sum(len(ts) for ts in self.replay_tasks.values())

    def _index(self, sid: str, time_ms: int) -> int:
        plan = self.plans[sid]
        index = 0
        for k, inc in enumerate(plan.incarnations):
            if time_ms >= inc.created_ms:
                index = k
        return index

    def check(self, replayed: list[ReplayedCommit], audit: Audit) -> None:
        self._ids(audit)
        for rc in replayed:
            self._acked(rc, audit)

    def _ids(self, audit: Audit) -> None:
        for tasks in self.replay_tasks.values():
            for task in tasks:
                if (task["task_id"], task.get("incarnation")) in self.live_ids:
                    audit.fail(
                        f"tasks: replay task {task['task_id']} (incarnation "
                        f"{task.get('incarnation')}) has the id of a live task"
                    )

    def _acked(self, rc: ReplayedCommit, audit: Audit) -> None:
        window = f"({rc.start_ms}, {rc.end_ms}]"
        current = self.numbers.get((rc.stream_id, rc.index), set())
        mine = [
            t
            for t in self.replay_tasks.get((rc.stream_id, rc.start_ms, rc.end_ms), [])
            if t["dispatched_ms"] <= rc.committed_ms
            and (not current or t.get("incarnation") in current)
        ]
        if not mine:
            audit.fail(
                f"{rc.where}: replayed window {window} has no replay task of the current "
                f"incarnation {sorted(current, key=str)} dispatched before its commit"
            )
            return
        acks = [
            (inc, ack_ms, t)
            for t in mine
            for inc, ack_ms in self.acks.get(
                (rc.stream_id, rc.start_ms, rc.end_ms, t["attempt"]), []
            )
            if inc is None or inc == t.get("incarnation")
        ]
        if not any(ack_ms == rc.end_ms for _, ack_ms, _ in acks):
            seen = sorted({(t["attempt"], ack_ms) for _, ack_ms, t in acks}, key=str)
            audit.fail(
                f"{rc.where}: replayed window {window} was not acked whole by a replay task of "
                f"the current incarnation (attempt, ack_ms of its replay acks: {seen})"
            )
