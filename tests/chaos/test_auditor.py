"""The chaos auditor's replay oracle, on hand-made records (no broker: it checks the checker)."""

from __future__ import annotations

from typing import Any

from tests.chaos.auditor import Audit, Auditor, Incarnation, Replay, StreamPlan

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
