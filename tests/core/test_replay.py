"""The replay lane: listing bypassed windows, dispatching them again, success and failure."""

from __future__ import annotations

from streams.core import BypassRecord, ErrorInfo, Result, StreamConfig
from streams.core.replay import (
    MAX_LISTED,
    ReplayState,
    advance,
    next_due_ms,
    note_bypass,
    on_result,
    replay_from_dict,
    replay_to_dict,
    request,
)

T0 = 1_795_946_400_000  # 2026-11-29T10:00:00Z
MIN = 60_000
HOUR = 3_600_000
CONFIG = StreamConfig("s", T0, task_timeout_ms=10_000)


def bypassed(start: int, attempts: int = 5) -> BypassRecord:
    return BypassRecord("s", start, start + MIN, attempts, start + MIN + 5_000,
                        start + MIN + 305_000, ErrorInfo("no_data", "empty"))  # fmt: skip


def listed(*starts: int) -> ReplayState:
    state = ReplayState("s")
    for start in starts:
        note_bypass(state, bypassed(start))
    return state


def result(start: int, attempt: int, outcome: str = "ack", **kw: object) -> Result:
    return Result("s", start, start + MIN, attempt, outcome, **kw)  # type: ignore[arg-type]


def test_replay_dispatches_listed_windows_in_range_within_concurrency() -> None:
    state = listed(T0, T0 + MIN, T0 + 2 * MIN, T0 + 5 * MIN)
    d = request(state, CONFIG, T0, T0 + 3 * MIN, concurrency=2, now_ms=T0 + HOUR)
    got = [(t.start_ms, t.attempt, t.replay) for t in d.tasks]
    assert got == [(T0, 6, True), (T0 + MIN, 6, True)]
    assert d.tasks[0].task_id == f"s/{T0}/6"
    assert d.tasks[0].to_wire()["replay"] is True
    assert d.tasks[0].deadline_ms == T0 + HOUR + 10_000
    # The third one waits for a free slot; the one out of range is untouched.
    d2 = on_result(state, CONFIG, result(T0, 6, ack_ms=T0 + MIN), 2, T0 + HOUR + 1)
    assert d2 is not None
    assert [t.start_ms for t in d2.tasks] == [T0 + 2 * MIN]
    assert [(w.start_ms, w.reason, w.attempts) for w in d2.replayed] == [(T0, "replayed", 6)]
    assert [w.start_ms for w in state.listed] == [T0 + MIN, T0 + 2 * MIN, T0 + 5 * MIN]


def test_a_failed_replay_stays_listed_with_its_attempts() -> None:
    state = listed(T0)
    request(state, CONFIG, T0, T0 + MIN, 1, T0 + HOUR)
    d = on_result(state, CONFIG, result(T0, 6, "nack", error=ErrorInfo("export", "503")), 1,
                  T0 + HOUR + 5)  # fmt: skip
    assert d is not None and d.replayed == ()
    (record,) = d.relisted
    assert (record.start_ms, record.attempts, record.last_error) == (
        T0,
        6,
        ErrorInfo("export", "503"),
    )
    assert state.listed[0].attempt == 0 and not state.busy
    # A second replay starts from the attempts so far.
    again = request(state, CONFIG, T0, T0 + MIN, 1, T0 + HOUR + 10)
    assert [t.attempt for t in again.tasks] == [7]


def test_a_replay_times_out_at_its_deadline_and_not_before() -> None:
    state = listed(T0)
    request(state, CONFIG, T0, T0 + MIN, 1, T0 + HOUR)
    assert next_due_ms(state) == T0 + HOUR + 10_000
    assert advance(state, CONFIG, 1, T0 + HOUR + 9_999).timeouts == 0
    d = advance(state, CONFIG, 1, T0 + HOUR + 10_000)
    assert d.timeouts == 1 and d.relisted[0].last_error.kind == "timeout"  # type: ignore[union-attr]
    assert next_due_ms(state) is None


def test_heartbeat_extends_and_stale_nack_is_ignored() -> None:
    state = listed(T0)
    request(state, CONFIG, T0, T0 + MIN, 1, T0 + HOUR)
    on_result(state, CONFIG, result(T0, 6, "heartbeat"), 1, T0 + HOUR + 8_000)
    assert next_due_ms(state) == T0 + HOUR + 18_000
    stale = on_result(state, CONFIG, result(T0, 5, "nack", error=ErrorInfo("x", "")), 1, T0 + HOUR)
    assert stale is not None and stale.ignored == "stale"
    never = on_result(state, CONFIG, result(T0, 9), 1, T0 + HOUR)
    assert (
        never is not None and never.rejected == "attempt: this replay attempt was never dispatched"
    )
    # A late ack of the live lane's last attempt still counts: the work was done.
    late = on_result(state, CONFIG, result(T0, 5, ack_ms=T0 + MIN), 1, T0 + HOUR + 9)
    assert late is not None and [w.start_ms for w in late.replayed] == [T0]


def test_results_outside_the_lane_are_left_to_the_live_lane() -> None:
    state = listed(T0)
    assert on_result(state, CONFIG, result(T0, 6), 1, T0) is None  # listed, not replaying
    assert on_result(state, CONFIG, result(T0 + MIN, 1), 1, T0) is None  # not listed


def test_bad_ranges_are_rejected() -> None:
    state = listed(T0)
    assert request(state, CONFIG, T0 + MIN, T0, 1, T0).rejected == "to_ms: must be after from_ms"
    assert "no bypassed window" in (request(state, CONFIG, T0 + MIN, T0 + 2 * MIN, 1, T0).rejected
                                    or "")  # fmt: skip


def test_the_list_is_bounded_and_round_trips() -> None:
    state = ReplayState("s")
    for i in range(MAX_LISTED + 5):
        note_bypass(state, bypassed(T0 + i * MIN))
    assert len(state.listed) == MAX_LISTED
    assert state.listed[0].start_ms == T0 + 5 * MIN  # the oldest were dropped
    request(state, CONFIG, T0 + 5 * MIN, T0 + 7 * MIN, 1, T0)
    again = replay_from_dict(replay_to_dict(state))
    assert again == state
