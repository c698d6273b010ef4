"""The chaos run's auditor: what a read_committed consumer of Tidemark's outputs must find.

It is given every record read from `commits`, `bypassed`, `tasks`, `results` and `rejected`
(in partition order, so a stream's records are in the order they were written), the plan of
streams the run created (each creation of a stream is an incarnation with its own history), the
inputs made bad on purpose and the replays sent. It returns the violations, one line each.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .outage_audit import OutageAudit, Recovery
from .replay_audit import ReplayAudit, ReplayedCommit


class Seen(NamedTuple):
    """One record as the auditor's consumer read it."""

    topic: str  # without the prefix: commits, bypassed, tasks, results, rejected
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass
class Incarnation:
    """One creation of a stream: its config and when the run sent the upsert (and the delete)."""

    start_ms: int
    window_ms: int
    step_ms: int
    bypass_after_ms: int
    created_ms: int
    non_retryable: tuple[str, ...] = ()
    max_attempts: int | None = None
    deleted_ms: int | None = None
    source: str | None = None
    outage_until_ms: int | None = None  # its synthetic failures end then (params)

    @property
    def origin_ms(self) -> int:
        return self.start_ms - self.start_ms % self.step_ms


@dataclass
class StreamPlan:
    stream_id: str
    kind: str
    incarnations: list[Incarnation] = field(default_factory=list)

    def at(self, time_ms: int) -> Incarnation:
        """The incarnation a record stamped `time_ms` (dispatched, bypassed) belongs to."""
        current = self.incarnations[0]
        for inc in self.incarnations[1:]:
            if time_ms >= inc.created_ms:
                current = inc
        return current


@dataclass
class Replay:
    stream_id: str
    from_ms: int
    to_ms: int
    sent_ms: int


@dataclass
class Audit:
    violations: list[str] = field(default_factory=list)
    windows: int = 0  # windows of every commit chain, each counted once
    acks: int = 0
    bypasses: int = 0
    repeats: int = 0  # windows announced again (allowed at least once, a violation exactly once)
    replayed: int = 0
    rejected_bad: int = 0
    rejected_late: int = 0  # results of a deleted incarnation, rejected as they should be
    marks: dict[str, int] = field(default_factory=dict)
    recoveries: list[Recovery] = field(default_factory=list)  # one per source in outage

    def fail(self, message: str) -> None:
        self.violations.append(message)


def _json(raw: bytes | None) -> Any:
    return None if raw is None else json.loads(raw)


class Auditor:
    def __init__(
        self,
        plans: dict[str, StreamPlan],
        engine: str,
        bad: set[tuple[str, int, int]],
        replays: list[Replay],
        resent: set[tuple[str, int, int]] | None = None,
        max_hold_ms: int = 0,
    ) -> None:
        self.plans = plans
        self.max_hold_ms = max_hold_ms  # the coordinators' TIDEMARK_OUTAGE_MAX_HOLD_MS
        self.resent = resent or set()  # replays asked again: all of their windows may be done
        self.exactly_once = engine == "confluent"
        self.bad = bad
        self.replays = replays

    def audit(self, records: list[Seen], target_ms: int) -> Audit:
        """Every check over everything read; `target_ms`: the mark every live stream must reach."""
        audit = Audit()
        by_topic: dict[str, list[Seen]] = defaultdict(list)
        for rec in records:
            by_topic[rec.topic].append(rec)
        tasks = self._tasks(by_topic["tasks"], audit)
        acks = self._acks(by_topic["results"])
        shutdowns = self._shutdowns(by_topic["results"])
        bypassed = self._bypassed(by_topic["bypassed"], audit)
        self.replayed_commits: list[ReplayedCommit] = []
        replayed = self._commits(by_topic["commits"], tasks, acks, bypassed, audit)
        ReplayAudit(self.plans, by_topic["tasks"], by_topic["results"]).check(
            self.replayed_commits, audit
        )
        self._budgets(bypassed, tasks, shutdowns, audit)
        all_tasks = [_json(r.value) for r in by_topic["tasks"]]
        audit.recoveries = OutageAudit(self.plans, self.max_hold_ms).check(
            bypassed, all_tasks, audit
        )
        self._replays(bypassed, replayed, audit)
        self._rejected(by_topic["rejected"], audit)
        self._caught_up(audit, target_ms)
        return audit

    # -- indexes -----------------------------------------------------------------------------

    def _tasks(self, seen: list[Seen], audit: Audit) -> dict[tuple[str, int, int], list[Any]]:
        """(stream, start, end) -> the live (non-replay) tasks, in order."""
        out: dict[tuple[str, int, int], list[Any]] = defaultdict(list)
        for rec in seen:
            task = _json(rec.value)
            sid = task["stream_id"]
            if sid not in self.plans:
                audit.fail(f"tasks: a task for {sid!r}, a stream the run never created: {task}")
                continue
            if not task.get("replay"):
                out[(sid, task["start_ms"], task["end_ms"])].append(task)
        return out

    @staticmethod
    def _acks(seen: list[Seen]) -> set[tuple[str, int, int]]:
        out = set()
        for rec in seen:
            try:
                res = _json(rec.value)
                if res.get("outcome") == "ack":
                    out.add((res["stream_id"], res["start_ms"], res["end_ms"]))
            except (ValueError, AttributeError, KeyError, TypeError):
                continue  # the fuzz burst's bad results
        return out

    @staticmethod
    def _shutdowns(seen: list[Seen]) -> set[tuple[str, int, int]]:
        out = set()
        for rec in seen:
            try:
                res = _json(rec.value)
                if res.get("outcome") == "nack" and res["error"]["kind"] == "shutdown":
                    out.add((res["stream_id"], res["start_ms"], res["end_ms"]))
            except (ValueError, AttributeError, KeyError, TypeError):
                continue
        return out

    def _bypassed(self, seen: list[Seen], audit: Audit) -> dict[str, list[Any]]:
        """key -> its records in order (None: a tombstone)."""
        out: dict[str, list[Any]] = defaultdict(list)
        for rec in seen:
            key = (rec.key or b"").decode()
            value = _json(rec.value)
            if value is not None and key != f"{value['stream_id']}/{value['start_ms']}":
                audit.fail(f"bypassed: key {key!r} does not name its value {value}")
            out[key].append(value)
        return out

    # -- commits -----------------------------------------------------------------------------

    def _commits(
        self,
        seen: list[Seen],
        tasks: dict[tuple[str, int, int], list[Any]],
        acks: set[tuple[str, int, int]],
        bypassed: dict[str, list[Any]],
        audit: Audit,
    ) -> set[tuple[str, int, int]]:
        """Walk each stream's commits; return the windows announced as replayed."""
        marks: dict[str, int] = {}  # stream -> its current incarnation's mark
        index: dict[str, int] = {}  # stream -> its current incarnation's index
        replayed: set[tuple[str, int, int]] = set()
        bypasses: set[tuple[str, int, int, int]] = set()  # (stream, incarnation, start, end)
        for rec in seen:
            commit = _json(rec.value)
            sid = commit["stream_id"]
            plan = self.plans.get(sid)
            if plan is None:
                audit.fail(f"commits: a commit for {sid!r}, never created: {commit}")
                continue
            windows = commit["windows"]
            k = index.get(sid, 0)
            # A re-created stream starts a new history at its own (earlier) origin.
            if k + 1 < len(plan.incarnations):
                nxt = plan.incarnations[k + 1]
                held = marks.get(sid, plan.incarnations[k].origin_ms)
                if commit["previous_ms"] == nxt.origin_ms < held:
                    k = index[sid] = k + 1
                    marks.pop(sid, None)
            inc = plan.incarnations[k]
            mark = marks.get(sid, inc.origin_ms)
            where = f"commits[{rec.partition}]@{rec.offset} {sid} (incarnation {k + 1})"
            previous, downstream = commit["previous_ms"], commit["downstream_ms"]
            if windows and all(w["reason"] == "replayed" for w in windows):
                self._replayed(sid, k, commit, mark, where, bypasses, replayed, audit)
                continue
            if downstream < mark:
                audit.fail(f"{where}: downstream_ms went back from {mark} to {downstream}")
                continue
            if previous > mark:
                audit.fail(f"{where}: a gap, previous_ms {previous} after the mark {mark}")
            elif previous < mark:
                audit.repeats += 1
                if self.exactly_once:
                    audit.fail(f"{where}: a repeat, previous_ms {previous} below mark {mark}")
            covered = previous
            for w in windows:
                if w["start_ms"] != covered:
                    audit.fail(f"{where}: windows do not tile at {covered}: {windows}")
                    break
                covered = w["end_ms"]
                if w["end_ms"] > mark:  # a window not seen before
                    self._accounted(sid, inc, w, commit, tasks, acks, bypassed, where, audit)
                    if w["reason"] == "bypass":
                        bypasses.add((sid, k, w["start_ms"], w["end_ms"]))
            if covered != downstream:
                audit.fail(f"{where}: windows end at {covered}, downstream_ms is {downstream}")
            marks[sid] = max(mark, downstream)
            audit.marks[sid] = marks[sid]
        self._final_incarnations(index, audit)
        return replayed

    def _replayed(
        self,
        sid: str,
        k: int,
        commit: dict[str, Any],
        mark: int,
        where: str,
        bypasses: set[tuple[str, int, int, int]],
        replayed: set[tuple[str, int, int]],
        audit: Audit,
    ) -> None:
        """A `replayed` commit is a link of its stream's chain like any other: previous_ms is
        the mark, and downstream_ms stays there (a replay closes windows behind it). Each of
        its windows was committed as a bypass before, in this incarnation."""
        previous, downstream = commit["previous_ms"], commit["downstream_ms"]
        if previous > mark:
            audit.fail(f"{where}: a gap, replayed commit's previous_ms {previous} after {mark}")
        elif previous < mark:
            audit.repeats += 1
            if self.exactly_once:
                audit.fail(f"{where}: a replayed commit's previous_ms {previous} below {mark}")
        if downstream != previous:
            audit.fail(
                f"{where}: a replayed commit moved downstream_ms from {previous} to {downstream}"
            )
        for w in commit["windows"]:
            replayed.add((sid, w["start_ms"], w["end_ms"]))
            if (sid, k, w["start_ms"], w["end_ms"]) not in bypasses:
                audit.fail(f"{where}: replayed window {w} before (or without) its bypass")
            self.replayed_commits.append(
                ReplayedCommit(sid, k, w["start_ms"], w["end_ms"], commit["committed_ms"], where)
            )

    def _accounted(
        self,
        sid: str,
        inc: Incarnation,
        w: dict[str, Any],
        commit: dict[str, Any],
        tasks: dict[tuple[str, int, int], list[Any]],
        acks: set[tuple[str, int, int]],
        bypassed: dict[str, list[Any]],
        where: str,
        audit: Audit,
    ) -> None:
        """A window announced for the first time: an ack or a bypass of this incarnation."""
        audit.windows += 1
        window = (sid, w["start_ms"], w["end_ms"])
        if w["reason"] == "ack":
            audit.acks += 1
            if window not in acks:
                audit.fail(f"{where}: window {w} committed as acked, no ack on results")
            mine = [
                t
                for t in tasks.get(window, [])
                if inc.created_ms <= t["dispatched_ms"] <= commit["committed_ms"]
            ]
            if not mine:
                audit.fail(
                    f"{where}: window {w} acked but never dispatched by this incarnation "
                    f"before its commit at {commit['committed_ms']}"
                )
        elif w["reason"] == "bypass":
            audit.bypasses += 1
            records = [
                r
                for r in bypassed.get(f"{sid}/{w['start_ms']}", [])
                if r is not None
                and r["end_ms"] == w["end_ms"]
                and r["bypassed_ms"] >= inc.created_ms
            ]
            if not records:
                audit.fail(f"{where}: window {w} committed as bypassed, no record on bypassed")
        else:
            audit.fail(f"{where}: window {w} of reason {w['reason']!r} among live windows")

    def _final_incarnations(self, index: dict[str, int], audit: Audit) -> None:
        for sid, plan in self.plans.items():
            last = len(plan.incarnations) - 1
            if plan.incarnations[last].deleted_ms is None and index.get(sid, 0) != last:
                audit.fail(f"commits: {sid}'s incarnation {last + 1} never committed anything")

    # -- bypass budgets ----------------------------------------------------------------------

    def _budgets(
        self,
        bypassed: dict[str, list[Any]],
        tasks: dict[tuple[str, int, int], list[Any]],
        shutdowns: set[tuple[str, int, int]],
        audit: Audit,
    ) -> None:
        # A failed replay lists the window again, with its attempts: same first failure and
        # bypass. Another bypass of the same window in one incarnation is a second bypass.
        seen_windows: dict[tuple[str, int, int, int], set[tuple[int, int]]] = defaultdict(set)
        for key, records in bypassed.items():
            for r in records:
                if r is None:
                    continue
                sid = r["stream_id"]
                plan = self.plans.get(sid)
                if plan is None:
                    audit.fail(f"bypassed {key}: a stream the run never created: {r}")
                    continue
                inc = plan.at(r["bypassed_ms"])
                window = (sid, r["start_ms"], r["end_ms"])
                seen_windows[(*window, inc.created_ms)].add(
                    (r["first_failed_ms"], r["bypassed_ms"])
                )
                kind = (r.get("last_error") or {}).get("kind")
                spent = r["bypassed_ms"] - r["first_failed_ms"]
                allowed = kind in inc.non_retryable or (
                    inc.max_attempts is not None and r["attempts"] >= inc.max_attempts
                )
                if not allowed and spent < inc.bypass_after_ms:
                    audit.fail(
                        f"bypassed {key}: bypassed after {spent} ms of a {inc.bypass_after_ms} ms "
                        f"budget (kind {kind!r}, {r['attempts']} attempts): {r}"
                    )
                if window in shutdowns:
                    continue
                retries = [
                    t["dispatched_ms"]
                    for t in tasks.get(window, [])
                    if t["attempt"] >= 2
                    and inc.created_ms <= t["dispatched_ms"] <= r["bypassed_ms"]
                ]
                if retries and r["first_failed_ms"] > min(retries):
                    audit.fail(
                        f"bypassed {key}: first_failed_ms {r['first_failed_ms']} is after a retry "
                        f"dispatched at {min(retries)}: the budget was reset"
                    )
        if self.exactly_once:
            for (sid, start, end, _), bypasses in seen_windows.items():
                if len(bypasses) > 1:
                    audit.fail(
                        f"bypassed {sid}/{start}: ({start}, {end}] bypassed {len(bypasses)} times "
                        f"(first failure, bypass): {sorted(bypasses)}"
                    )

    # -- replays -----------------------------------------------------------------------------

    def _replays(
        self,
        bypassed: dict[str, list[Any]],
        replayed: set[tuple[str, int, int]],
        audit: Audit,
    ) -> None:
        asked: set[str] = set()
        for rp in self.replays:
            for key, records in bypassed.items():
                sid, _, start = key.rpartition("/")
                if sid != rp.stream_id:
                    continue
                in_range = [
                    r
                    for r in records
                    if r is not None and r["end_ms"] > rp.from_ms and int(start) < rp.to_ms
                ]
                if not in_range:
                    continue
                listed = [r for r in in_range if r["bypassed_ms"] < rp.sent_ms]
                if not listed:
                    # Bypassed after the replay was sent, inside its range: the coordinator
                    # replays what is listed when it reads the replay, so this window may be
                    # replayed, but only with its `replayed` window on commits.
                    last = in_range[-1]
                    if (sid, last["start_ms"], last["end_ms"]) in replayed:
                        asked.add(key)
                        if records[-1] is None:
                            audit.replayed += 1
                    continue
                last = listed[-1]
                asked.add(key)
                if records[-1] is not None:
                    audit.fail(f"bypassed {key}: replayed at {rp.sent_ms}, never tombstoned")
                elif (sid, last["start_ms"], last["end_ms"]) not in replayed:
                    audit.fail(f"bypassed {key}: tombstoned, no replayed window on commits")
                else:
                    audit.replayed += 1
        deleted = {
            sid for sid, p in self.plans.items() if any(i.deleted_ms for i in p.incarnations)
        }
        for key, records in bypassed.items():
            sid = key.rpartition("/")[0]
            if None in records and key not in asked and sid not in deleted:
                audit.fail(f"bypassed {key}: tombstoned though never replayed nor deleted")

    # -- rejected ----------------------------------------------------------------------------

    def _rejected(self, seen: list[Seen], audit: Audit) -> None:
        recreated = {
            sid for sid, p in self.plans.items() if any(i.deleted_ms for i in p.incarnations)
        }
        count: dict[tuple[str, int, int], int] = defaultdict(int)
        for rec in seen:
            r = _json(rec.value)
            where = (r["source_topic"], r["partition"], r["offset"])
            if not r.get("reason"):
                audit.fail(f"rejected: no reason given: {r}")
            if where in self.bad:
                count[where] += 1
                continue
            if where in self.resent and "no bypassed window" in r["reason"]:
                continue
            if r["source_topic"].endswith(".results"):
                try:
                    sid = json.loads(r["value"])["stream_id"]
                except (TypeError, ValueError, KeyError):
                    sid = None
                if sid in recreated:
                    audit.rejected_late += 1
                    continue
            audit.fail(f"rejected: an input that was not made bad: {r}")
        for where in sorted(self.bad):
            n = count.get(where, 0)
            if n == 0:
                audit.fail(f"rejected: the bad input {where} was never rejected")
            elif n > 1 and self.exactly_once:
                audit.fail(f"rejected: the bad input {where} was rejected {n} times")
        audit.rejected_bad = sum(1 for n in count.values() if n)

    # -- catching up -------------------------------------------------------------------------

    def _caught_up(self, audit: Audit, target_ms: int) -> None:
        for sid, plan in self.plans.items():
            inc = plan.incarnations[-1]
            if inc.deleted_ms is not None:
                continue
            mark = audit.marks.get(sid, inc.origin_ms)
            if mark < target_ms - inc.window_ms:
                audit.fail(f"{sid} ({plan.kind}) did not catch up: at {mark}, {target_ms} due")
