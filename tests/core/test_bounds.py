"""Bounds: every config the wire decoder accepts keeps every state the core computes readable.

The state codec refuses times beyond MAX_MS, so a config whose sums overflow it (a retry
interval of 2**53 - 1, say) would freeze its stream after one failure. Here any accepted config,
driven through any sequence of dispatches, acks, nacks, heartbeats, timeouts, reconfigurations
and clock moves within [0, MAX_TIME_MS], leaves a state that encodes (with orjson, as the store
does) and decodes back to itself, and outputs that the wire models accept.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from streams.core import (
    Decision,
    ErrorInfo,
    Pause,
    Result,
    Resume,
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
from streams.core._checks import MAX_DURATION_MS, MAX_MS, MAX_SAFE_INT, MAX_TIME_MS
from streams.core.config import MAX_IN_FLIGHT
from streams.core.gate import Gate
from streams.core.lanes import Lane
from streams.errors import InvalidInput
from streams.wire import BypassedMessage, TaskMessage, decode_control

T0 = 1_795_946_400_000  # 2026-11-29T10:00:00Z
OPS = ("advance", "ack", "partial_ack", "nack", "heartbeat", "shutdown", "upsert", "pause")


def test_the_largest_computable_time_stays_within_what_the_codec_reads() -> None:
    # A time given (at most MAX_TIME_MS), max_in_flight windows past it, and one more duration.
    assert MAX_TIME_MS + (MAX_IN_FLIGHT + 1) * MAX_DURATION_MS <= MAX_MS
    assert MAX_SAFE_INT == MAX_MS == 2**53 - 1


# Durations and times are small, near their bound or anywhere below it; one field in four
# examples is then spoiled with a value past its bound, which the decoder must turn away.
def durations(minimum: int = 1) -> st.SearchStrategy[int]:
    return st.one_of(
        st.integers(minimum, 120_000),
        st.integers(MAX_DURATION_MS - 1_000, MAX_DURATION_MS),
        st.integers(minimum, MAX_DURATION_MS),
    )


times = st.one_of(
    st.integers(T0 - 86_400_000, T0 + 86_400_000),
    st.integers(MAX_TIME_MS - MAX_DURATION_MS, MAX_TIME_MS),
    st.just(MAX_TIME_MS),
    st.integers(0, MAX_TIME_MS),
)
too_large = st.one_of(st.integers(MAX_DURATION_MS + 1, MAX_MS), st.just(MAX_MS))

retries = st.one_of(
    st.just({"strategy": "immediate"}),
    st.builds(lambda ms: {"strategy": "fixed", "interval_ms": ms}, durations()),
    st.builds(
        lambda initial, extra, multiplier, jitter: {
            "strategy": "exponential",
            "initial_ms": initial,
            "multiplier": multiplier,
            "max_ms": min(initial + extra, MAX_DURATION_MS),
            "jitter": jitter,
        },
        durations(),
        st.one_of(st.just(0), durations()),
        st.sampled_from([1.0, 2.0, 10.0, 1e300]),
        st.sampled_from([0.0, 0.5, 1.0]),
    ),
)
SPOILABLE = (
    "start_ms",
    "window_ms",
    "delay_ms",
    "task_timeout_ms",
    "bypass_after_ms",
    "retry.interval_ms",
    "retry.initial_ms",
    "retry.max_ms",
)


@st.composite
def upserts(draw: st.DrawFn) -> dict[str, Any]:
    step_ms = draw(durations())
    steps = draw(st.one_of(st.integers(1, 4), st.just(MAX_DURATION_MS // step_ms)))
    fields: dict[str, Any] = {
        "type": "upsert",
        "stream_id": "s",
        "start_ms": draw(times),
        "window_ms": step_ms * steps,
        "step_ms": step_ms,
        "delay_ms": draw(durations(0)),
        "task_timeout_ms": draw(durations()),
        "bypass_after_ms": draw(durations()),
        "retry": draw(retries),
        "max_attempts": draw(st.one_of(st.none(), st.integers(1, 5))),
        "non_retryable": ["fatal"],
        "max_in_flight": draw(st.one_of(st.integers(1, 4), st.just(MAX_IN_FLIGHT))),
    }
    if draw(st.integers(0, 3)) == 0:
        spoiled = draw(st.sampled_from(SPOILABLE))
        value = draw(too_large)
        if spoiled == "window_ms":
            value -= value % step_ms
        if spoiled.startswith("retry."):
            name = spoiled.removeprefix("retry.")
            fields["retry"] = {"strategy": "fixed" if name == "interval_ms" else "exponential"}
            fields["retry"] |= {"initial_ms": 1, "multiplier": 2.0, name: value}
            fields["retry"].setdefault("max_ms", value)
        else:
            fields[spoiled] = MAX_TIME_MS + 1 if spoiled == "start_ms" else value
    return fields


def decoded(fields: dict[str, Any]) -> Upsert | None:
    """The wire decoder's Upsert, or None when it rejects the control (naming a field of it)."""
    try:
        control = decode_control(orjson.dumps(fields))
    except InvalidInput as exc:
        assert exc.field.split(".")[0] in fields, exc
        return None
    assert isinstance(control, Upsert)
    return control


def check_readable(decision: Decision) -> None:
    """The state reads back as itself, and the outputs are what the wire models accept."""
    state = decision.state
    if state is not None:
        stored = state_to_dict(state)
        assert state_to_dict(state_from_dict(orjson.loads(orjson.dumps(stored)))) == stored
        row = state_to_row(state)
        assert state_to_row(state_from_row(orjson.loads(orjson.dumps(row)))) == row
    for task in decision.tasks:
        TaskMessage.model_validate(orjson.loads(orjson.dumps(task.to_wire())))
    for record in decision.bypasses:
        BypassedMessage.model_validate(orjson.loads(orjson.dumps(record.to_wire())))


def result_for(state: StreamState, op: str, pick: int, now_ms: int) -> Result | None:
    """A result of `op` for one in-flight window of `state` (None when nothing is in flight)."""
    flying = [w for w in state.windows if w.in_flight]
    if not flying:
        return None
    window = flying[pick % len(flying)]
    args = (state.config.stream_id, window.start_ms, window.end_ms, window.attempt)
    if op == "ack":
        return Result(*args, "ack", ack_ms=window.end_ms)
    if op == "partial_ack":
        return Result(*args, "ack", ack_ms=(window.start_ms + window.end_ms + 1) // 2)
    if op == "heartbeat":
        return Result(*args, "heartbeat")
    kind = "shutdown" if op == "shutdown" else ("fatal" if pick % 5 == 0 else "flaky")
    return Result(*args, "nack", error=ErrorInfo(kind, f"failed at {now_ms}"))


class ScriptGate:
    """Admits or denies by a script, over and over (streams.core.gate)."""

    def __init__(self, script: list[bool]) -> None:
        self.script = script
        self.asks = 0

    def admit(
        self, state: StreamState, start_ms: int, end_ms: int, lane: Lane, now_ms: int
    ) -> bool:
        self.asks += 1
        return self.script[self.asks % len(self.script)]


BOUNDS_SETTINGS = settings(
    max_examples=150,  # 0.35 s an example: states of a thousand windows, each read back 4 ways
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@BOUNDS_SETTINGS
@given(st.data(), upserts())
def test_any_accepted_config_keeps_every_state_readable(
    data: st.DataObject, fields: dict[str, Any]
) -> None:
    _drive(data, fields, None)


@BOUNDS_SETTINGS
@given(st.data(), upserts(), st.lists(st.booleans(), min_size=1, max_size=8))
def test_waits_for_a_gate_keep_every_state_readable(
    data: st.DataObject, fields: dict[str, Any], script: list[bool]
) -> None:
    """The same with a gate that denies dispatches by a script: a window's wait
    (waiting_since_ms, waited_ms) stays within what the codec reads, the clock stepping back
    included."""
    _drive(data, fields, ScriptGate(script))


def _drive(data: st.DataObject, fields: dict[str, Any], gate: Gate | None) -> None:
    upsert = decoded(fields)
    event("accepted" if upsert is not None else "rejected")
    if upsert is None:
        return
    now_ms = data.draw(times, "created at")
    decision = create_state(upsert.config, now_ms, gate=gate)
    check_readable(decision)
    for _ in range(data.draw(st.integers(1, 25), "steps")):
        state = decision.state
        assert state is not None
        now_ms = data.draw(
            st.one_of(
                st.integers(now_ms, min(now_ms + 600_000, MAX_TIME_MS)),
                st.integers(now_ms, MAX_TIME_MS),  # often far past every due time
                st.just(MAX_TIME_MS),
                times,  # the clock may step back, too
            ),
            "now_ms",
        )
        op = data.draw(st.sampled_from(OPS), "op")
        if op == "advance":
            decision = advance(state, now_ms, gate=gate)
        elif op == "upsert":
            again = decoded({**data.draw(upserts(), "reconfigured"), "stream_id": "s"})
            decision = decision if again is None else apply_control(state, again, now_ms, gate)
        elif op == "pause":
            control = Resume("s") if state.paused else Pause("s")
            decision = apply_control(state, control, now_ms, gate)
        else:
            result = result_for(state, op, data.draw(st.integers(0, 999), "window"), now_ms)
            if result is None:
                decision = advance(state, now_ms, gate=gate)
            else:
                decision = apply_result(state, result, now_ms, gate=gate)
                assert decision.rejected is None, decision.rejected
        check_readable(decision)
        if decision.state is not None and any(w.waited_ms for w in decision.state.windows):
            event("a window waited after a failure")
