"""Property tests of the gate in the replay lane (streams.core.replay): random requests, results
and ticks. Under a gate that denies by a random script, only admitted windows go out (each one
asked is queued, passed by the live lane and within `concurrency`), in order, and a denied one
stays queued; under OPEN the lane decides exactly as with no gate."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.core import BypassRecord, ErrorInfo, Result, StreamConfig, StreamState
from streams.core.gate import OPEN, Gate
from streams.core.lanes import Lane
from streams.core.replay import (
    ReplayDecision,
    ReplayState,
    advance,
    note_bypass,
    on_result,
    replay_to_dict,
    request,
)

from .helpers import T0

MIN = 60_000
HOUR = 3_600_000
CONFIG = StreamConfig("s", T0, task_timeout_ms=10_000)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class ScriptGate:
    script: list[bool]
    asks: list[tuple[int, Lane, bool]] = field(default_factory=list)

    def admit(
        self, state: StreamState, start_ms: int, end_ms: int, lane: Lane, now_ms: int
    ) -> bool:
        answer = self.script[len(self.asks) % len(self.script)]
        self.asks.append((start_ms, lane, answer))
        return answer


def _lane(count: int) -> tuple[ReplayState, StreamState]:
    """`count` bypassed windows, a minute apart; the live lane has passed all but the last."""
    replay = ReplayState("s")
    for i in range(count):
        start_ms = T0 + i * MIN
        error = ErrorInfo("no_data", "empty")
        note_bypass(replay, BypassRecord("s", start_ms, start_ms + MIN, 3, T0, T0, error))
    passed_ms = T0 + max(count - 1, 1) * MIN
    return replay, StreamState(CONFIG, passed_ms, passed_ms, passed_ms)


def _step(
    replay: ReplayState, live: StreamState, op: tuple[str, int], concurrency: int, now_ms: int,
    gate: Gate | None,
) -> ReplayDecision:  # fmt: skip
    kind, pick = op
    flying = [w for w in replay.listed if w.attempt]
    if kind == "request":
        return request(replay, live, T0, T0 + (pick % 8 + 1) * MIN, concurrency, now_ms, gate)
    if kind == "advance" or not flying:
        return advance(replay, live, concurrency, now_ms, gate=gate)
    w = flying[pick % len(flying)]
    outcome = "ack" if kind == "ack" else "nack"
    result = Result("s", w.start_ms, w.end_ms, w.attempt, outcome, ack_ms=w.end_ms)
    decision = on_result(replay, live, result, concurrency, now_ms, gate)
    assert decision is not None
    return decision


ops = st.tuples(st.sampled_from(["request", "advance", "ack", "nack"]), st.integers(0, 99))


@SETTINGS
@given(
    st.integers(1, 8),
    st.integers(1, 4),
    st.lists(st.booleans(), min_size=1, max_size=8),
    st.lists(st.tuples(ops, st.sampled_from([0, 1_000, 20_000])), max_size=30),
)
def test_the_replay_lane_dispatches_only_what_the_gate_admits(
    count: int, concurrency: int, script: list[bool], steps: list[tuple[tuple[str, int], int]]
) -> None:
    replay, live = _lane(count)
    gate = ScriptGate(script)
    now_ms = T0 + HOUR
    for op, tick_ms in steps:
        now_ms += tick_ms
        queued = {w.start_ms for w in replay.listed if w.queued}
        free = concurrency - replay.in_flight
        seen = len(gate.asks)
        decision = _step(replay, live, op, concurrency, now_ms, gate)
        asks = gate.asks[seen:]
        assert all(lane == "replay" for _, lane, _ in asks)
        starts = [start_ms for start_ms, _, _ in asks]
        assert starts == sorted(set(starts)), "each window asked once, in order"
        admitted = [start_ms for start_ms, _, yes in asks if yes]
        assert [t.start_ms for t in decision.tasks] == admitted, "admitted = dispatched"
        assert all(t.replay for t in decision.tasks)
        assert len(admitted) <= max(free, 0) + len(decision.replayed) + len(decision.relisted)
        assert replay.in_flight <= concurrency
        listed = {w.start_ms: w for w in replay.listed}
        for start_ms, _, yes in asks:
            assert start_ms + MIN <= live.downstream_ms, "asked before the live lane passed it"
            assert start_ms in queued or op[0] == "request"
            if not yes:
                assert listed[start_ms].queued and not listed[start_ms].attempt


@SETTINGS
@given(
    st.integers(1, 8),
    st.integers(1, 4),
    st.lists(st.tuples(ops, st.sampled_from([0, 1_000, 20_000])), max_size=30),
)
def test_an_open_gate_replays_exactly_as_no_gate(
    count: int, concurrency: int, steps: list[tuple[tuple[str, int], int]]
) -> None:
    plain, live = _lane(count)
    gated, _ = _lane(count)
    now_ms = T0 + HOUR
    for op, tick_ms in steps:
        now_ms += tick_ms
        assert _step(gated, live, op, concurrency, now_ms, OPEN) == _step(
            plain, live, op, concurrency, now_ms, None
        )
        assert replay_to_dict(gated) == replay_to_dict(plain)
