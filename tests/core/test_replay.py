"""The replay lane: listing bypassed windows, dispatching them again, success and failure."""

from __future__ import annotations

from dataclasses import replace

from streams.core import BypassRecord, ErrorInfo, Result, StreamConfig, StreamState
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
# The live lane, well past every window listed here (a replay waits until it has passed one).
LIVE = StreamState(CONFIG, T0 + 9 * HOUR, T0 + 9 * HOUR, T0 + 9 * HOUR, incarnation=7)


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
    d = request(state, LIVE, T0, T0 + 3 * MIN, concurrency=2, now_ms=T0 + HOUR)
    got = [(t.start_ms, t.attempt, t.replay) for t in d.tasks]
    assert got == [(T0, 6, True), (T0 + MIN, 6, True)]
    assert d.tasks[0].task_id == f"s/{T0}/6"
    assert d.tasks[0].to_wire()["replay"] is True
    assert d.tasks[0].deadline_ms == T0 + HOUR + 10_000
    # The third one waits for a free slot; the one out of range is untouched.
    d2 = on_result(state, LIVE, result(T0, 6, ack_ms=T0 + MIN), 2, T0 + HOUR + 1)
    assert d2 is not None
    assert [t.start_ms for t in d2.tasks] == [T0 + 2 * MIN]
    assert [(w.start_ms, w.reason, w.attempts) for w in d2.replayed] == [(T0, "replayed", 6)]
    assert [w.start_ms for w in state.listed] == [T0 + MIN, T0 + 2 * MIN, T0 + 5 * MIN]


def test_a_failed_replay_stays_listed_with_its_attempts() -> None:
    state = listed(T0)
    request(state, LIVE, T0, T0 + MIN, 1, T0 + HOUR)
    d = on_result(state, LIVE, result(T0, 6, "nack", error=ErrorInfo("export", "503")), 1,
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
    again = request(state, LIVE, T0, T0 + MIN, 1, T0 + HOUR + 10)
    assert [t.attempt for t in again.tasks] == [7]


def test_a_replay_times_out_at_its_deadline_and_not_before() -> None:
    state = listed(T0)
    request(state, LIVE, T0, T0 + MIN, 1, T0 + HOUR)
    assert next_due_ms(state, LIVE, 1) == T0 + HOUR + 10_000
    assert advance(state, LIVE, 1, T0 + HOUR + 9_999).timeouts == 0
    d = advance(state, LIVE, 1, T0 + HOUR + 10_000)
    assert d.timeouts == 1 and d.relisted[0].last_error.kind == "timeout"  # type: ignore[union-attr]
    assert next_due_ms(state, LIVE, 1) is None


def test_heartbeat_extends_and_stale_nack_is_ignored() -> None:
    state = listed(T0)
    request(state, LIVE, T0, T0 + MIN, 1, T0 + HOUR)
    on_result(state, LIVE, result(T0, 6, "heartbeat"), 1, T0 + HOUR + 8_000)
    assert next_due_ms(state, LIVE, 1) == T0 + HOUR + 18_000
    advance(state, LIVE, 1, T0 + HOUR + 18_000)  # replay attempt 6 timed out
    request(state, LIVE, T0, T0 + MIN, 1, T0 + HOUR + 20_000)  # attempt 7
    stale = on_result(state, LIVE, result(T0, 6, "nack", error=ErrorInfo("x", "")), 1, T0 + HOUR)
    assert stale is not None and stale.ignored == "stale"
    never = on_result(state, LIVE, result(T0, 9, ack_ms=T0 + MIN), 1, T0 + HOUR)
    assert (
        never is not None and never.rejected == "attempt: this replay attempt was never dispatched"
    )
    # A late ack of the live lane's last attempt is the live lane's (a duplicate there): only a
    # replay task's ack makes a window `replayed` (issue 25, defect 4).
    assert on_result(state, LIVE, result(T0, 5, ack_ms=T0 + MIN), 1, T0 + HOUR + 9) is None
    # A late ack of an earlier replay attempt still counts: the work was done, by a replay.
    late = on_result(state, LIVE, result(T0, 6, ack_ms=T0 + MIN), 1, T0 + HOUR + 21_000)
    assert late is not None and [w.start_ms for w in late.replayed] == [T0]


def test_results_outside_the_lane_are_left_to_the_live_lane() -> None:
    state = listed(T0)
    assert on_result(state, LIVE, result(T0, 6), 1, T0) is None  # listed, not replaying
    assert on_result(state, LIVE, result(T0 + MIN, 1), 1, T0) is None  # not listed


def test_bad_ranges_are_rejected() -> None:
    state = listed(T0)
    assert request(state, LIVE, T0 + MIN, T0, 1, T0).rejected == "to_ms: must be after from_ms"
    assert "no bypassed window" in (request(state, LIVE, T0 + MIN, T0 + 2 * MIN, 1, T0).rejected
                                    or "")  # fmt: skip


def test_the_list_is_bounded_and_round_trips() -> None:
    state = ReplayState("s")
    for i in range(MAX_LISTED + 5):
        note_bypass(state, bypassed(T0 + i * MIN))
    assert len(state.listed) == MAX_LISTED
    assert state.listed[0].start_ms == T0 + 5 * MIN  # the oldest were dropped
    request(state, LIVE, T0 + 5 * MIN, T0 + 7 * MIN, 1, T0)
    again = replay_from_dict(replay_to_dict(state))
    assert again == state


# -- issue 25: the replay lane's edges -------------------------------------------------------------


def replaying(start: int = T0, dispatches: int = 5, failures: int = 5) -> tuple[ReplayState, int]:
    """One window bypassed after `dispatches` live attempts (`failures` of them failed), its
    replay in flight; returns the state and the replay's attempt."""
    state = ReplayState("s")
    note_bypass(state, replace(bypassed(start, failures), dispatches=dispatches))
    (task,) = request(state, LIVE, start, start + MIN, 1, T0 + HOUR).tasks
    return state, task.attempt


def test_a_replay_ack_must_cover_its_whole_window() -> None:  # defect 2
    state, attempt = replaying()
    for ack_ms in (T0, 0, T0 + 1, T0 + MIN - 1, T0 + MIN + 1):
        d = on_result(state, LIVE, result(T0, attempt, ack_ms=ack_ms), 1, T0 + HOUR + 1)
        assert d is not None and d.rejected is not None and d.rejected.startswith("ack_ms")
        assert d.replayed == () and state.listed[0].attempt == attempt  # nothing changed
    d = on_result(state, LIVE, result(T0, attempt, ack_ms=T0 + MIN), 1, T0 + HOUR + 2)
    assert d is not None and [w.start_ms for w in d.replayed] == [T0] and state.listed == []


def test_a_replay_result_of_another_incarnation_is_rejected() -> None:  # defect 3
    state, attempt = replaying()
    for outcome, kw in (("ack", {"ack_ms": T0 + MIN}), ("nack", {"error": ErrorInfo("x", "")})):
        d = on_result(state, LIVE, result(T0, attempt, outcome, incarnation=6, **kw), 1, T0)
        assert d is not None and (d.rejected or "").startswith("incarnation 6")
    assert state.listed[0].attempt == attempt and state.listed[0].attempts == 5
    d = on_result(state, LIVE, result(T0, attempt, incarnation=7, ack_ms=T0 + MIN), 1, T0)
    assert d is not None and len(d.replayed) == 1


def test_replay_attempts_are_numbered_after_every_live_dispatch() -> None:  # defect 4
    # 6 live dispatches, 4 failures (2 shutdowns): the replay is attempt 7, not 5.
    state, attempt = replaying(dispatches=6, failures=4)
    assert attempt == 7
    # A result of live attempt 5 or 6 is the live lane's, whatever its outcome.
    for live_attempt in (5, 6):
        nacked = result(T0, live_attempt, "nack", error=ErrorInfo("x", ""))
        assert on_result(state, LIVE, nacked, 1, T0 + HOUR + 1) is None
    # A failed replay goes on from its own number: the next one is 8.
    on_result(state, LIVE, result(T0, 7, "nack", error=ErrorInfo("x", "")), 1, T0 + HOUR + 2)
    assert state.listed[0].attempts == 5
    (again,) = request(state, LIVE, T0, T0 + MIN, 1, T0 + HOUR + 3).tasks
    assert again.attempt == 8 and again.incarnation == 7


def test_a_takeover_grace_keeps_replay_deadlines_and_dispatches() -> None:  # defect 5
    state, attempt = replaying()
    deadline_ms = state.listed[0].deadline_ms
    d = advance(state, LIVE, 1, deadline_ms + HOUR, expire=False)
    assert d.timeouts == 0 and state.listed[0].attempt == attempt
    assert next_due_ms(state, LIVE, 1, deadlines=False) is None
    assert advance(state, LIVE, 1, deadline_ms).timeouts == 1


def test_a_replay_waits_until_the_live_lane_has_passed_its_window() -> None:  # defect 1
    state = listed(T0 + 10 * HOUR)  # beyond LIVE's downstream_ms (a rewound stream)
    assert request(state, LIVE, T0, T0 + 11 * HOUR, 1, T0).tasks == ()
    assert next_due_ms(state, LIVE, 1) is None
    passed = StreamState(CONFIG, T0 + 11 * HOUR, T0 + 11 * HOUR, T0 + 11 * HOUR, incarnation=7)
    assert next_due_ms(state, passed, 1) == 0
    (task,) = advance(state, passed, 1, T0 + 1).tasks
    assert task.start_ms == T0 + 10 * HOUR


def test_a_replay_state_of_version_1_is_read_and_its_numbering_goes_on() -> None:
    # As the coordinator before issue 25 stored it: one window idle (5 failures), one with its
    # replay attempt 6 in flight.
    error = ["no_data", "empty"]
    v1 = {"v": 1, "stream_id": "s", "announcing": [[T0 - MIN, T0, 3]], "listed": [
        [T0, T0 + MIN, 5, T0 + 1, T0 + 2, error, False, 0, 0],
        [T0 + MIN, T0 + 2 * MIN, 5, T0 + 1, T0 + 2, error, False, 6, T0 + HOUR],
    ]}  # fmt: skip
    state = replay_from_dict(v1)
    assert [w.attempt for w in state.listed] == [0, 6]
    late = on_result(state, LIVE, result(T0 + MIN, 6, ack_ms=T0 + 2 * MIN), 1, T0 + HOUR - 1)
    assert late is not None and [w.attempts for w in late.replayed] == [6]
    (task,) = request(state, LIVE, T0, T0 + MIN, 1, T0 + HOUR).tasks
    assert task.attempt == 6  # failures + 1, as version 1 numbered it
    assert replay_from_dict(replay_to_dict(state)) == state


def test_a_replay_acked_before_the_live_lane_passed_its_window_is_ignored_early() -> None:
    # Only a replay sent by a coordinator before issue 25 (which did not wait for the live
    # lane) can be in flight there: its replayed commit could not follow its bypass yet.
    error = ["no_data", "empty"]
    late = T0 + 10 * HOUR  # after LIVE's downstream_ms
    state = replay_from_dict({"v": 1, "stream_id": "s", "listed": [
        [late, late + MIN, 5, late + 1, late + 2, error, False, 6, late + HOUR]]})  # fmt: skip
    d = on_result(state, LIVE, Result("s", late, late + MIN, 6, "ack", late + MIN), 1, late)
    assert d is not None and d.ignored == "early" and state.listed[0].attempt == 6
