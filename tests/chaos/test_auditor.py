"""The chaos auditor's replay oracle, on hand-made records (no broker: it checks the checker)."""

from __future__ import annotations

import json
from typing import Any

from tests.chaos.auditor import Audit, Auditor, Incarnation, Replay, Seen, StreamPlan
from tests.chaos.outage_audit import OutageAudit

SENT_MS = 10_000


def _bypass(start_ms: int, bypassed_ms: int) -> dict[str, Any]:
    failed_ms = bypassed_ms - 100
    return {"stream_id": "r", "start_ms": start_ms, "end_ms": start_ms + 2000,
            "attempts": 2, "first_failed_ms": failed_ms, "bypassed_ms": bypassed_ms}  # fmt: skip


def _audit(bypassed: dict[str, list[Any]], replayed: set[tuple[str, int, int]]) -> Audit:
    plan = StreamPlan("r", "replay", [Incarnation(0, 2000, 1000, 5000, created_ms=0)])
    auditor = Auditor({"r": plan}, "confluent", set(), [Replay("r", 0, 8000, SENT_MS)])
    audit = Audit()
    auditor._replays(bypassed, replayed, audit)
    return audit


def test_a_window_listed_when_the_replay_was_sent_must_be_replayed_and_tombstoned() -> None:
    listed = {"r/2000": [_bypass(2000, SENT_MS - 1)]}
    assert _audit(listed, set()).violations == [
        "bypassed r/2000: replayed at 10000, never tombstoned"
    ]
    done = {"r/2000": [_bypass(2000, SENT_MS - 1), None]}
    audit = _audit(done, {("r", 2000, 4000)})
    assert (audit.violations, audit.replayed) == ([], 1)


def test_a_window_bypassed_after_the_replay_was_sent_but_in_its_range_may_be_replayed() -> None:
    # The coordinator lists the range when it reads the replay, which can be after a later bypass.
    late = {"r/4000": [_bypass(4000, SENT_MS + 5000), None]}
    audit = _audit(late, {("r", 4000, 6000)})
    assert (audit.violations, audit.replayed) == ([], 1)
    # ... or stay listed, if the replay was read first.
    assert _audit({"r/4000": [_bypass(4000, SENT_MS + 5000)]}, set()).violations == []


def test_a_tombstone_without_its_replayed_window_or_outside_every_range_is_a_violation() -> None:
    late = {"r/4000": [_bypass(4000, SENT_MS + 5000), None]}
    assert _audit(late, set()).violations == [
        "bypassed r/4000: tombstoned though never replayed nor deleted"
    ]
    outside = {"r/9000": [_bypass(9000, SENT_MS - 1), None]}
    assert _audit(outside, {("r", 9000, 11000)}).violations == [
        "bypassed r/9000: tombstoned though never replayed nor deleted"
    ]


# -- the replay lane in the commits chain (tests/chaos/replay_audit.py) --------------------------

W = 60_000  # one window of stream "s": (0, W] bypassed then replayed, (W, 2W] acked
INC = 7  # the coordinator's incarnation number of "s"


def _seen(topic: str, values: list[Any], keys: list[str] | None = None) -> list[Seen]:
    keys = keys or ["s"] * len(values)
    return [
        Seen(topic, 0, i, k.encode(), None if v is None else json.dumps(v).encode())
        for i, (k, v) in enumerate(zip(keys, values, strict=True))
    ]


def _task(start_ms: int, attempt: int, dispatched_ms: int, **extra: Any) -> dict[str, Any]:
    return {"task_id": f"s/{start_ms}/{attempt}", "stream_id": "s", "start_ms": start_ms,
            "end_ms": start_ms + W, "step_ms": W, "attempt": attempt,
            "dispatched_ms": dispatched_ms, "deadline_ms": dispatched_ms + 1000, "params": {},
            "incarnation": INC, **extra}  # fmt: skip


def _ack(start_ms: int, attempt: int, ack_ms: int, incarnation: int = INC) -> dict[str, Any]:
    return {"stream_id": "s", "start_ms": start_ms, "end_ms": start_ms + W, "attempt": attempt,
            "outcome": "ack", "ack_ms": ack_ms, "incarnation": incarnation}  # fmt: skip


def _commit(previous_ms: int, downstream_ms: int, reason: str, at_ms: int) -> dict[str, Any]:
    windows = [] if reason == "none" else [{"start_ms": previous_ms, "end_ms": previous_ms + W,
                                            "reason": reason, "attempts": 1}]  # fmt: skip
    return {"stream_id": "s", "previous_ms": previous_ms, "downstream_ms": downstream_ms,
            "committed_ms": at_ms, "windows": windows}  # fmt: skip


BYPASS = _commit(0, W, "bypass", 2500)
ACKED = _commit(W, 2 * W, "ack", 2600)
# The replay of (0, W]: announced at the chain's mark, downstream_ms unmoved.
REPLAYED = {
    **_commit(2 * W, 2 * W, "none", 4000),
    "windows": [{"start_ms": 0, "end_ms": W, "reason": "replayed", "attempts": 2}],
}
TASKS = [_task(0, 1, 10), _task(W, 1, 20), _task(0, 2, 3000, replay=True)]
RESULTS = [_ack(W, 1, 2 * W), _ack(0, 2, W)]


def _chain_audit(
    commits: list[Any], tasks: list[Any] = TASKS, results: list[Any] = RESULTS
) -> list[str]:
    plan = StreamPlan("s", "replay", [Incarnation(0, W, W, 1000, created_ms=0)])
    listed = {"stream_id": "s", "start_ms": 0, "end_ms": W, "attempts": 1,
              "first_failed_ms": 100, "bypassed_ms": 2000, "last_error": None}  # fmt: skip
    bypassed = [listed, None]
    records = (
        _seen("commits", commits)
        + _seen("tasks", tasks)
        + _seen("results", results)
        + _seen("bypassed", bypassed, ["s/0", "s/0"])
    )
    auditor = Auditor({"s": plan}, "confluent", set(), [Replay("s", 0, W, 2800)])
    return auditor.audit(records, target_ms=0).violations


def test_a_replayed_commit_at_the_chains_mark_after_its_bypass_and_acked_whole_passes() -> None:
    assert _chain_audit([BYPASS, ACKED, REPLAYED]) == []


def test_a_replayed_commit_announced_past_the_mark_breaks_the_chain() -> None:
    # Issue 25, defect 1: (0, 60000] bypass, (120000, 120000) replayed, then (60000, 120000) ack.
    assert _chain_audit([BYPASS, REPLAYED, ACKED]) == [
        "commits[0]@1 s (incarnation 1): a gap, replayed commit's previous_ms 120000 after 60000"
    ]


def test_a_replayed_commit_that_moves_downstream_or_comes_before_its_bypass_is_reported() -> None:
    moved = {**REPLAYED, "downstream_ms": 3 * W}
    assert _chain_audit([BYPASS, ACKED, moved]) == [
        "commits[0]@2 s (incarnation 1): a replayed commit moved downstream_ms from 120000 "
        "to 180000"
    ]
    first = {**REPLAYED, "previous_ms": 0, "downstream_ms": 0}
    violations = _chain_audit([first, BYPASS, ACKED])
    assert violations == [
        "commits[0]@0 s (incarnation 1): replayed window {'start_ms': 0, 'end_ms': 60000, "
        "'reason': 'replayed', 'attempts': 2} before (or without) its bypass"
    ]


def test_a_replayed_window_needs_a_whole_ack_of_a_replay_task_of_the_current_incarnation() -> None:
    where = "commits[0]@2 s (incarnation 1): replayed window (0, 60000]"
    partial = [_ack(W, 1, 2 * W), _ack(0, 2, W // 2)]  # issue 25, defect 2
    assert _chain_audit([BYPASS, ACKED, REPLAYED], results=partial) == [
        f"{where} was not acked whole by a replay task of the current incarnation "
        "(attempt, ack_ms of its replay acks: [(2, 30000)])"
    ]
    # Issue 25, defect 3: the replay task and its ack are of an earlier incarnation.
    old = [_task(0, 1, 10), _task(W, 1, 20), _task(0, 2, 3000, replay=True, incarnation=3)]
    assert _chain_audit([BYPASS, ACKED, REPLAYED], tasks=old, results=RESULTS) == [
        f"{where} has no replay task of the current incarnation [7] dispatched before its commit"
    ]
    old_ack = [_ack(W, 1, 2 * W), _ack(0, 2, W, incarnation=3)]
    assert _chain_audit([BYPASS, ACKED, REPLAYED], results=old_ack) == [
        f"{where} was not acked whole by a replay task of the current incarnation "
        "(attempt, ack_ms of its replay acks: [])"
    ]


def test_a_replay_task_with_a_live_tasks_id_is_reported() -> None:
    # Issue 25, defect 4: a shutdown nack made the replay's attempt equal a live attempt.
    tasks = [_task(0, 1, 10), _task(0, 2, 500), _task(W, 1, 20), _task(0, 2, 3000, replay=True)]
    assert _chain_audit([BYPASS, ACKED, REPLAYED], tasks=tasks) == [
        "tasks: replay task s/0/2 (incarnation 7) has the id of a live task"
    ]


# -- the outage guard (tests/chaos/outage_audit.py) ----------------------------------------------

UNTIL_MS = 60_000  # source S is down from 0 to here; budget 5 s, outage_max_hold_ms 20 s


def _outage_audit(bypasses: list[tuple[int, int]], dispatched: list[int]) -> Audit:
    plans = {
        sid: StreamPlan(sid, "source", [Incarnation(0, 2000, 1000, 5000, created_ms=0,
                                                    source="S", outage_until_ms=UNTIL_MS)])
        for sid in ("a", "b", "c")
    }  # fmt: skip
    bypassed = {
        f"a/{i}": [{"stream_id": "a", "start_ms": i, "end_ms": i + 2000, "attempts": 9,
                    "first_failed_ms": failed_ms, "bypassed_ms": at_ms, "last_error": None}]
        for i, (failed_ms, at_ms) in enumerate(bypasses)
    }  # fmt: skip
    tasks = [{"stream_id": "b", "dispatched_ms": at_ms} for at_ms in dispatched]
    audit = Audit()
    audit.recoveries = OutageAudit(plans, max_hold_ms=20_000).check(bypassed, tasks, audit)
    return audit


def test_a_bypass_while_the_source_is_down_is_reported_unless_past_the_longest_hold() -> None:
    audit = _outage_audit([(1000, 7000), (1000, 25_999), (2000, 27_000), (50_000, 61_000)], [])
    assert len(audit.violations) == 2, audit.violations
    assert audit.violations[0].startswith(
        "bypassed a/0: bypassed while source S was down (until 60000), 6000 ms after its first "
        "failure: less than its budget 5000 ms and outage_max_hold_ms 20000"
    )
    assert audit.violations[1].startswith("bypassed a/1: bypassed while source S was down")
    # (2000, 27000) held its full 20 s after the budget; (50000, 61000) came after recovery.
    assert audit.recoveries[0].held_bypasses == 1


def test_the_tasks_released_at_recovery_are_counted_per_second() -> None:
    during = list(range(0, UNTIL_MS, 1000))  # one task a second in the outage
    after = [UNTIL_MS + 10] * 30 + [UNTIL_MS + 1500] * 5 + [UNTIL_MS + 9999]
    audit = _outage_audit([], during + after + [UNTIL_MS + 10_000])
    (recovery,) = audit.recoveries
    assert (recovery.streams, recovery.released, recovery.peak_rate) == (3, 36, 30)
    assert recovery.per_second == [30, 5, 0, 0, 0, 0, 0, 0, 0, 1]
    assert recovery.outage_rate == 1.0
    assert recovery.line().startswith("source S (3 streams): 0 bypasses after the longest hold")
