"""Property tests of the gate the lifecycle asks before each dispatch (streams.core.gate).

1. Random inputs under a gate that denies by a random script: a denied window is not
   dispatched (attempt, due_ms and deadline unchanged, its wait recorded), every window due is
   asked, in window order, each admitted one goes out at once and none before its due_ms; the
   time each window waited after its first failure, as this test counts it, is the core's
   `waited_ms`, and no time-based bypass comes before `bypass_after_ms` of failure time
   without it.
2. OPEN (and a gate that admits everything and records the asks) decides exactly as no gate:
   the same outputs and states on random inputs.
3. One window failing again and again, its dispatches delayed by the gate: it fails exactly as
   many times before its time-based bypass as with OPEN, and its failure time without the
   waits is the same; under the outage guard, its hold starts at that same failure and lasts
   `max_hold_ms` of wall time, waits included (streams.core.waiting).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from streams.core import (
    Decision,
    ErrorInfo,
    Fixed,
    Immediate,
    Pause,
    Result,
    Resume,
    StreamConfig,
    StreamState,
    Upsert,
    advance,
    apply_control,
    apply_result,
    create_state,
    state_from_dict,
    state_from_row,
    state_to_dict,
    state_to_row,
)
from streams.core.gate import OPEN, Gate
from streams.core.lanes import Lane
from streams.core.retry import Exponential

from .helpers import T0

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
OPS = ("advance", "advance", "ack", "partial_ack", "nack", "nack", "heartbeat", "shutdown")
OPS += ("pause", "upsert")

retries = st.one_of(
    st.just(Immediate()),
    st.builds(Fixed, st.sampled_from([1, 1_000, 10_000])),
    st.builds(
        Exponential,
        initial_ms=st.sampled_from([1, 500, 5_000]),
        multiplier=st.sampled_from([1.0, 2.0]),
        max_ms=st.sampled_from([5_000, 60_000]),
        jitter=st.sampled_from([0.0, 0.5]),
    ),
)


@st.composite
def configs(draw: st.DrawFn) -> StreamConfig:
    step_ms = draw(st.sampled_from([1_000, 15_000]))
    return StreamConfig(
        stream_id="s",
        start_ms=T0 - draw(st.integers(0, 600_000)),
        window_ms=step_ms * draw(st.integers(1, 3)),
        step_ms=step_ms,
        delay_ms=draw(st.sampled_from([0, 2_000])),
        task_timeout_ms=draw(st.sampled_from([5_000, 30_000])),
        bypass_after_ms=draw(st.sampled_from([1, 20_000, 120_000])),
        retry=draw(retries),
        max_attempts=draw(st.none() | st.integers(1, 5)),
        non_retryable=frozenset({"fatal"}),
        max_in_flight=draw(st.integers(1, 4)),
    )


@dataclass
class ScriptGate:
    """Answers each ask with the next answer of its script (over and over); records the asks."""

    script: list[bool]
    asks: list[tuple[int, int, Lane, int, bool]] = field(default_factory=list)

    def admit(
        self, state: StreamState, start_ms: int, end_ms: int, lane: Lane, now_ms: int
    ) -> bool:
        answer = self.script[len(self.asks) % len(self.script)]
        self.asks.append((start_ms, end_ms, lane, now_ms, answer))
        return answer


def _step(state: StreamState, op: str, pick: int, now_ms: int, gate: Gate | None) -> Decision:
    """One input of kind `op` (a result for the `pick`th window in flight, if any)."""
    if op == "pause":
        control = Resume("s") if state.paused else Pause("s")
        return apply_control(state, control, now_ms, gate=gate)
    if op == "upsert":  # how failures are handled changes; the windows' shape stays
        fields = {name: getattr(state.config, name) for name in state.config.__slots__}
        changed = StreamConfig(**{**fields, "bypass_after_ms": (1, 20_000, 120_000)[pick % 3]})
        return apply_control(state, Upsert(changed), now_ms, gate=gate)
    flying = [w for w in state.windows if w.in_flight]
    if op == "advance" or not flying:
        return advance(state, now_ms, gate=gate)
    w = flying[pick % len(flying)]
    args = ("s", w.start_ms, w.end_ms, w.attempt)
    if op == "ack":
        result = Result(*args, "ack", ack_ms=w.end_ms)
    elif op == "partial_ack":
        result = Result(*args, "ack", ack_ms=(w.start_ms + w.end_ms + 1) // 2)
    elif op == "heartbeat":
        result = Result(*args, "heartbeat")
    else:
        kind = "shutdown" if op == "shutdown" else ("fatal" if pick % 7 == 0 else "flaky")
        result = Result(*args, "nack", error=ErrorInfo(kind, "from the property test"))
    return apply_result(state, result, now_ms, gate=gate)


@dataclass
class Waits:
    """This test's own count of each window's wait (by start_ms), from the gate's asks."""

    since: dict[int, int] = field(default_factory=dict)
    waited: dict[int, int] = field(default_factory=dict)

    def end(self, state: StreamState, start_ms: int, now_ms: int) -> None:
        since_ms = self.since.pop(start_ms, None)
        first_ms = next(w.first_failed_ms for w in state.windows if w.start_ms == start_ms)
        if since_ms is not None and first_ms is not None:
            self.waited[start_ms] = self.waited.get(start_ms, 0) + now_ms - max(since_ms, first_ms)


def _check_gated(
    state: StreamState,
    decision: Decision,
    before: dict[int, tuple[int, int, bool]],
    asks: list[Any],
    now_ms: int,
) -> None:
    """The rules of a gated decision (item 1 of the module's docstring)."""
    config = state.config
    starts = [start_ms for start_ms, *_ in asks]
    assert starts == sorted(set(starts)), "each window asked once, in window order"
    assert all(lane == "live" and at_ms == now_ms for _, _, lane, at_ms, _ in asks)
    admitted = [(start_ms, end_ms) for start_ms, end_ms, _, _, yes in asks if yes]
    assert [(t.start_ms, t.end_ms) for t in decision.tasks] == admitted, "admitted = dispatched"
    windows = {w.start_ms: w for w in state.windows}
    for task in decision.tasks:
        w = windows[task.start_ms]
        assert w.in_flight and w.attempt == task.attempt and w.waiting_since_ms is None
        assert w.due_ms <= now_ms == task.dispatched_ms, "dispatched before its due_ms"
        assert task.deadline_ms == now_ms + config.task_timeout_ms  # counted from the dispatch
    assert not (state.paused and asks), "a paused stream asked the gate"
    denied = {start_ms for start_ms, _, _, _, yes in asks if not yes}
    for start_ms in denied:
        w = windows[start_ms]
        assert not w.in_flight and w.deadline_ms is None and w.due_ms <= now_ms
        attempt, due_ms, in_flight = before.get(start_ms, (0, w.due_ms, False))
        assert w.attempt == attempt, "a denied window was dispatched"
        if not in_flight:  # nothing but a dispatch moves its due time: a denial never does
            assert w.due_ms == due_ms
        assert w.waiting_since_ms is not None and w.waiting_since_ms <= now_ms
    if not state.paused:  # every window due was asked
        due = {w.start_ms for w in state.windows if w.due_ms <= now_ms and not w.finished}
        assert due - {w.start_ms for w in state.windows if w.in_flight} == denied


@SETTINGS
@given(st.data(), configs(), st.lists(st.booleans(), min_size=1, max_size=12))
def test_a_denied_window_waits_and_its_wait_spends_no_bypass_budget(
    data: st.DataObject, config: StreamConfig, script: list[bool]
) -> None:
    gate = ScriptGate(script)
    now_ms = T0
    decision = create_state(config, now_ms, gate=gate)
    state = decision.state
    assert state is not None
    waits = Waits()
    seen = 0
    for _ in range(data.draw(st.integers(1, 40), "steps")):
        asks = gate.asks[seen:]
        seen = len(gate.asks)
        for start_ms, _, _, _, yes in asks:  # this test's count of the waits
            if yes:
                waits.end(state, start_ms, now_ms)
            else:
                waits.since.setdefault(start_ms, now_ms)
        for w in state.windows:
            if w.in_flight or w.finished:
                waits.since.pop(w.start_ms, None)
            assert w.waited_ms == waits.waited.get(w.start_ms, 0), "waited_ms counted wrong"
            if not w.finished:
                assert w.waiting_since_ms == waits.since.get(w.start_ms)
        for bypass in decision.bypasses:
            error = bypass.last_error
            assert error is not None
            if error.kind in config.non_retryable or (
                config.max_attempts is not None and bypass.attempts >= config.max_attempts
            ):
                continue
            event("time-based bypass")
            failing_ms = bypass.bypassed_ms - bypass.first_failed_ms
            waited_ms = waits.waited.get(bypass.start_ms, 0)
            assert failing_ms - waited_ms >= state.config.bypass_after_ms, "bypassed by a wait"
            if waited_ms:
                event("time-based bypass after a wait")
        text = json.dumps(state_to_row(state))
        assert state_to_row(state_from_row(json.loads(text))) == json.loads(text)
        assert state_from_dict(state_to_dict(state)) == state

        now_ms += data.draw(st.sampled_from([0, 1, 999, 5_000, 30_000, 120_000]), "tick")
        op = data.draw(st.sampled_from(OPS), "op")
        if op == "pause" and not state.paused:  # a pause ends every wait, as a dispatch does
            for w in state.windows:
                if w.start_ms in waits.since:
                    waits.end(state, w.start_ms, now_ms)
        anew: set[int] = set()
        if op == "upsert":  # the windows never dispatched at the tail are made anew
            for w in reversed(state.windows):
                if w.attempt or w.finished or w.closed:
                    break
                waits.since.pop(w.start_ms, None)
                anew.add(w.start_ms)
        # A window made anew may start where an old one did, with another end and due time.
        before = {
            w.start_ms: (w.attempt, w.due_ms, w.in_flight)
            for w in state.windows
            if w.start_ms not in anew
        }
        config = state.config
        decision = _step(state, op, data.draw(st.integers(0, 99), "pick"), now_ms, gate)
        if decision.rejected is None and decision.ignored is None:
            _check_gated(state, decision, before, gate.asks[seen:], now_ms)
            config = state.config
        else:
            assert gate.asks[seen:] == [], "a rejected input asked the gate"
        if any(w.waiting_since_ms is not None for w in state.windows):
            event("a window waits")


class AdmitAll:
    """Admits everything, counting the asks."""

    def __init__(self) -> None:
        self.asks = 0

    def admit(
        self, state: StreamState, start_ms: int, end_ms: int, lane: Lane, now_ms: int
    ) -> bool:
        self.asks += 1
        return True


@SETTINGS
@given(st.data(), configs(), st.sampled_from(["open", "recording"]))
def test_an_open_gate_decides_exactly_as_no_gate(
    data: st.DataObject, config: StreamConfig, which: str
) -> None:
    gate: Gate = OPEN if which == "open" else AdmitAll()
    now_ms = T0
    plain, gated = create_state(config, now_ms), create_state(config, now_ms, gate=gate)
    ungated_state, gated_state = plain.state, gated.state
    assert ungated_state is not None and gated_state is not None
    for _ in range(data.draw(st.integers(1, 40), "steps")):
        assert (gated.tasks, gated.bypasses, gated.rejected, gated.ignored) == (
            plain.tasks, plain.bypasses, plain.rejected, plain.ignored,
        )  # fmt: skip
        assert (gated.timeouts, gated.requeues) == (plain.timeouts, plain.requeues)
        assert state_to_dict(gated_state) == state_to_dict(ungated_state)
        assert state_to_row(gated_state) == state_to_row(ungated_state)
        now_ms += data.draw(st.sampled_from([0, 1, 999, 5_000, 30_000, 120_000]), "tick")
        op = data.draw(st.sampled_from(OPS), "op")
        pick = data.draw(st.integers(0, 99), "pick")
        plain = _step(ungated_state, op, pick, now_ms, None)
        gated = _step(gated_state, op, pick, now_ms, gate)
    if isinstance(gate, AdmitAll) and gate.asks:
        event("the recording gate was asked")
