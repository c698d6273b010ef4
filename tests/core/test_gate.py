"""The gate, by example: what a denial does to a window, its wait and its stored form, in the
live lane, at the outage guard's release and in the replay lane (the properties are in
test_gate_lifecycle.py and test_gate_budget.py)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import pytest

from streams.core import (
    BypassRecord,
    ErrorInfo,
    StreamState,
    advance,
    apply_control,
    apply_result,
    next_due_ms,
    release,
    state_from_dict,
    state_from_row,
    state_to_dict,
    state_to_row,
)
from streams.core.gate import OPEN
from streams.core.lanes import Lane
from streams.core.model import Pause, Resume
from streams.core.replay import ReplayState, note_bypass, request
from streams.core.replay import advance as replay_advance
from streams.errors import InvalidInput

from .helpers import MINUTE_MS, ack, at, nack, only, started
from .test_codec import _busy_state


@dataclass
class Switch:
    """Admits while `open`; records every ask."""

    open: bool = False
    asks: list[tuple[int, Lane, int]] = field(default_factory=list)

    def admit(
        self, state: StreamState, start_ms: int, end_ms: int, lane: Lane, now_ms: int
    ) -> bool:
        self.asks.append((start_ms, lane, now_ms))
        return self.open


def _failed_once() -> tuple[StreamState, Switch]:
    """A stream whose first window failed at 10:01:05, its retry (fixed 60 s) due at 10:02:05."""
    state, (task,) = started(at(10, 1))
    apply_result(state, nack(task), at(10, 1, 5))
    return state, Switch()


def test_a_denied_retry_waits_and_goes_out_when_admitted() -> None:
    state, gate = _failed_once()
    window = state.windows[0]
    before = (window.attempt, window.due_ms, window.deadline_ms)
    assert advance(state, at(10, 2, 5), gate=gate).tasks == ()
    assert advance(state, at(10, 3), gate=gate).tasks == ()
    assert (window.attempt, window.due_ms, window.deadline_ms) == before
    assert window.waiting_since_ms == at(10, 2, 5) and window.waited_ms == 0
    assert gate.asks == [(at(10, 0), "live", at(10, 2, 5)), (at(10, 0), "live", at(10, 3))]
    assert next_due_ms(state) == at(10, 2, 5)  # due as before: the coordinator parks it
    gate.open = True
    retry = only(advance(state, at(10, 4), gate=gate))
    assert (retry.attempt, retry.dispatched_ms, retry.deadline_ms) == (2, at(10, 4), at(10, 5))
    assert window.waiting_since_ms is None and window.waited_ms == 2 * MINUTE_MS - 5_000


def test_a_window_that_waited_is_bypassed_only_after_its_budget_of_failure_time() -> None:
    state, gate = _failed_once()  # bypass_after_ms: 5 min from 10:01:05
    advance(state, at(10, 2, 5), gate=gate)
    gate.open = True
    retry = only(advance(state, at(10, 6, 5), gate=gate))  # waited 4 min
    decision = apply_result(state, nack(retry), at(10, 7), gate=gate)
    assert decision.bypasses == ()  # 5 min 55 s since the failure, 1 min 55 s of it failing
    seed, (task,) = started(at(10, 1))
    apply_result(seed, nack(task), at(10, 1, 5))
    retry = only(advance(seed, at(10, 6, 5)))  # no gate: the same times bypass it
    assert len(apply_result(seed, nack(retry), at(10, 7)).bypasses) == 1


def test_a_pause_ends_a_wait_and_its_time_is_not_waiting() -> None:
    state, gate = _failed_once()
    advance(state, at(10, 2, 5), gate=gate)
    apply_control(state, Pause("cluster-a"), at(10, 3, 5), gate=gate)
    window = state.windows[0]
    assert window.waiting_since_ms is None and window.waited_ms == MINUTE_MS
    assert apply_control(state, Resume("cluster-a"), at(11, 0), gate=gate).tasks == ()
    assert window.waiting_since_ms == at(11, 0)  # a new wait, from the resume
    gate.open = True
    only(advance(state, at(11, 1), gate=gate))
    assert window.waited_ms == 2 * MINUTE_MS


def test_a_late_ack_of_a_waiting_window_ends_its_wait() -> None:
    state, (head, task) = started(at(10, 2), max_in_flight=2, task_timeout_ms=10 * MINUTE_MS)
    apply_result(state, nack(task), at(10, 2, 5))
    advance(state, at(10, 3, 5), gate=Switch())
    window = state.windows[1]
    assert window.waiting_since_ms == at(10, 3, 5)
    apply_result(state, ack(task), at(10, 3, 10), gate=Switch())  # its first attempt's, late
    assert window.finished and window.waiting_since_ms is None  # kept behind the head
    assert state.windows[0].in_flight and state.windows[0].start_ms == head.start_ms


def test_a_denial_blocks_no_later_window() -> None:
    state, (task,) = started(at(10, 1, 30), max_in_flight=2)
    apply_result(state, nack(task), at(10, 1, 35))  # retry due at 10:02:35
    seen = []

    class DenyFirst:
        def admit(self, s: StreamState, start_ms: int, end_ms: int, lane: Lane, now: int) -> bool:
            seen.append(start_ms)
            return start_ms != at(10, 0)

    decision = advance(state, at(10, 2, 35), gate=DenyFirst())
    assert seen == [at(10, 0), at(10, 1)]  # in order: the denied retry, then the next window
    assert [t.start_ms for t in decision.tasks] == [at(10, 1)]


def test_release_asks_the_gate() -> None:
    state, (task,) = started(at(10, 1))
    hold_ms = 3_600_000
    for minute in range(1, 8):  # held from 10:06:05, due again at 10:08:05
        apply_result(state, nack(task), at(10, minute, 5), hold_ms)
        task = only(advance(state, at(10, minute + 1, 5), max_hold_ms=hold_ms))
    apply_result(state, nack(task), at(10, 8, 5), hold_ms)
    gate = Switch()
    assert release(state, at(10, 8, 30), gate).tasks == ()
    assert state.windows[0].waiting_since_ms == at(10, 8, 30)
    gate.open = True
    assert only(release(state, at(10, 8, 40), gate)).dispatched_ms == at(10, 8, 40)


def test_the_replay_lane_asks_the_gate_and_keeps_a_denied_window_queued() -> None:
    state, _ = started(at(12, 0))
    state.downstream_ms = at(11, 0)  # the live lane has passed the replayed window
    replay = ReplayState("cluster-a")
    first, second = at(10, 0), at(10, 1)
    for start_ms in (first, second):
        error = ErrorInfo("no_data", "empty")
        end_ms = start_ms + MINUTE_MS
        note_bypass(replay, BypassRecord("cluster-a", start_ms, end_ms, 2, end_ms, end_ms, error))
    gate = Switch()
    assert request(replay, state, first, second + MINUTE_MS, 2, at(12, 0), gate).tasks == ()
    assert gate.asks == [(first, "replay", at(12, 0)), (second, "replay", at(12, 0))]
    assert all(w.queued and not w.attempt for w in replay.listed)
    gate.open = True
    decision = replay_advance(replay, state, 2, at(12, 1), gate=gate)
    assert [(t.start_ms, t.replay) for t in decision.tasks] == [(first, True), (second, True)]


# -- the stored form -------------------------------------------------------------------------------

# sha256 of json.dumps(state_to_row(_busy_state())) and of state_to_dict's, computed on main
# before the gate existed: a state without waits is stored byte for byte as it was.
BEFORE_THE_GATE = (
    "91f90632dea0605eb6da6b8f5e2eb8f8de43ebac8f96bfdb07c6b794ec7251fb",
    "6a0e0e91f4276c28c39d985a6b1516b72470361380097c3cb333811190a0e3e1",
)


def test_a_state_without_waits_is_stored_as_before_the_gate() -> None:
    state = _busy_state()
    row, readable = json.dumps(state_to_row(state)), json.dumps(state_to_dict(state))
    assert (hashlib.sha256(row.encode()).hexdigest(),
            hashlib.sha256(readable.encode()).hexdigest()) == BEFORE_THE_GATE  # fmt: skip
    assert all(len(w) == 13 for w in json.loads(row)[6])


def test_a_waiting_window_round_trips_in_both_forms() -> None:
    state, gate = _failed_once()
    advance(state, at(10, 2, 5), gate=gate)  # denied: it waits from 10:02:05
    gate.open = True
    retry = only(advance(state, at(10, 3, 5), gate=gate))  # waited a minute
    apply_result(state, nack(retry), at(10, 3, 10))  # due again at 10:04:10
    gate.open = False
    advance(state, at(10, 4, 10), gate=gate)  # and waits again
    window = state.windows[0]
    assert (window.waiting_since_ms, window.waited_ms) == (at(10, 4, 10), MINUTE_MS)
    row = json.loads(json.dumps(state_to_row(state)))
    assert row[6][0][13:] == [at(10, 4, 10), MINUTE_MS]
    assert state_from_row(row) == state
    readable = json.loads(json.dumps(state_to_dict(state)))
    assert readable["windows"][0]["waited_ms"] == MINUTE_MS
    assert state_from_dict(readable) == state


@pytest.mark.parametrize(
    ("tail", "field"),
    [
        ([None, -1], "windows.waited_ms"),
        (["soon", 0], "windows.waiting_since_ms"),
        ([1], "windows"),
    ],
)
def test_a_malformed_wait_is_refused_naming_its_field(tail: list[object], field: str) -> None:
    state, _ = started(at(10, 0))
    row = state_to_row(state)
    row[6][0] += tail
    with pytest.raises(InvalidInput) as caught:
        state_from_row(row)
    assert caught.value.field == field


def test_open_admits_everything() -> None:
    state, _ = started(at(10, 0))
    assert OPEN.admit(state, at(10, 0), at(10, 1), "live", at(10, 1))
    assert OPEN.admit(state, at(10, 0), at(10, 1), "replay", at(10, 1))
