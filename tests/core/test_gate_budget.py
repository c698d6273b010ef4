"""One window failing again and again while a gate delays each of its dispatches: waiting for
admission spends none of its bypass budget, and the outage guard's hold counts wall time, waits
included (streams.core.waiting). Each run is compared with the same failures under no gate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.core import (
    BypassRecord,
    ErrorInfo,
    Exponential,
    Fixed,
    Immediate,
    Result,
    StreamConfig,
    StreamState,
    advance,
    apply_result,
    create_state,
)
from streams.core.lanes import Lane

from .helpers import T0


@dataclass
class DelayGate:
    """Denies the window's k-th dispatch until `delays_ms[k]` (cycling) after it is first asked."""

    delays_ms: list[int]
    waits_ms: list[int] = field(default_factory=list)  # each dispatch's wait
    asked_ms: int | None = None

    def opens_ms(self) -> int:
        assert self.asked_ms is not None
        return self.asked_ms + self.delays_ms[len(self.waits_ms) % len(self.delays_ms)]

    def admit(
        self, state: StreamState, start_ms: int, end_ms: int, lane: Lane, now_ms: int
    ) -> bool:
        if self.asked_ms is None:
            self.asked_ms = now_ms
        if now_ms < self.opens_ms():
            return False
        self.waits_ms.append(now_ms - self.asked_ms)
        self.asked_ms = None
        return True


@dataclass
class Run:
    failures_ms: list[int]
    bypass: BypassRecord
    held_ms: int | None


def _run(config: StreamConfig, gate: DelayGate | None, answer_ms: int | None, hold_ms: int) -> Run:
    """Fail every dispatch of the stream's first window (a nack `answer_ms` after it, or its
    deadline) until it is bypassed, with the source in outage throughout when `hold_ms` > 0."""
    now_ms = T0
    decision = create_state(config, now_ms, gate=gate)
    state = decision.state
    assert state is not None
    failures_ms: list[int] = []
    while not decision.bypasses:
        assert len(failures_ms) < 2_000
        (window,) = state.windows
        if decision.tasks:
            (task,) = decision.tasks
            assert window.due_ms <= now_ms, "dispatched before its due time"
            if answer_ms is None:
                now_ms = task.deadline_ms
                decision = advance(state, now_ms, max_hold_ms=hold_ms, gate=gate)
            else:
                now_ms += answer_ms
                error = ErrorInfo("flaky", "from the property test")
                result = Result("s", task.start_ms, task.end_ms, task.attempt, "nack", error=error)
                decision = apply_result(state, result, now_ms, hold_ms, gate=gate)
            failures_ms.append(now_ms)
            continue
        assert not window.in_flight
        if window.waiting_since_ms is not None:  # denied: ask again when the gate opens
            assert gate is not None and gate.opens_ms() > now_ms
            now_ms = gate.opens_ms()
        else:
            assert window.due_ms > now_ms
            now_ms = window.due_ms
        decision = advance(state, now_ms, max_hold_ms=hold_ms, gate=gate)
    (bypass,) = decision.bypasses
    assert bypass.bypassed_ms == failures_ms[-1]
    return Run(failures_ms, bypass, state.unannounced[-1].held_ms)


retries = st.one_of(
    st.just(Immediate()),
    st.builds(Fixed, st.sampled_from([1, 1_000, 10_000])),
    st.builds(Exponential, initial_ms=st.sampled_from([1, 2_000]), jitter=st.just(0.5)),
)


@st.composite
def failing(draw: st.DrawFn) -> tuple[StreamConfig, int | None]:
    """A stream whose first window is due at T0, and how its attempts fail (None: timeouts)."""
    config = StreamConfig(
        stream_id="s",
        start_ms=T0 - 120_000,
        window_ms=60_000,
        step_ms=15_000,
        delay_ms=draw(st.sampled_from([0, 2_000])),
        task_timeout_ms=draw(st.sampled_from([5_000, 30_000])),
        bypass_after_ms=draw(st.sampled_from([1, 20_000, 120_000])),
        retry=draw(retries),
    )
    return config, draw(st.sampled_from([None, 1_000, 4_000]))


delays = st.lists(st.sampled_from([0, 0, 1, 5_000, 60_000, 600_000]), min_size=1, max_size=8)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(failing(), delays)
def test_waiting_spends_no_bypass_budget(
    stream: tuple[StreamConfig, int | None], delays_ms: list[int]
) -> None:
    config, answer_ms = stream
    plain = _run(config, None, answer_ms, 0)
    gate = DelayGate(delays_ms)
    gated = _run(config, gate, answer_ms, 0)
    assert len(gated.failures_ms) == len(plain.failures_ms), "a wait changed the failures"
    waited_ms = sum(gate.waits_ms[1:])  # the first dispatch's wait is before any failure
    assert gated.bypass.first_failed_ms == plain.bypass.first_failed_ms + gate.waits_ms[0]
    failing_ms = gated.bypass.bypassed_ms - gated.bypass.first_failed_ms - waited_ms
    assert failing_ms == plain.bypass.bypassed_ms - plain.bypass.first_failed_ms
    assert failing_ms >= config.bypass_after_ms
    assert gated.bypass.bypassed_ms >= plain.bypass.bypassed_ms + sum(gate.waits_ms)


@SETTINGS
@given(failing(), delays, st.sampled_from([1, 30_000, 200_000]))
def test_the_outage_hold_starts_where_the_budget_ends_and_counts_waits(
    stream: tuple[StreamConfig, int | None], delays_ms: list[int], hold_ms: int
) -> None:
    config, answer_ms = stream
    plain = _run(config, None, answer_ms, 0)
    gate = DelayGate(delays_ms)
    held = _run(config, gate, answer_ms, hold_ms)
    # The hold starts at the failure that would have bypassed the window without it: the same
    # one as without waits, since the waits spend no budget.
    start = len(plain.failures_ms) - 1
    held_since_ms = held.failures_ms[start]
    # It lasts hold_ms of wall time, the waits in it included: the first failure past that
    # bypasses the window.
    end = next(
        i
        for i, at_ms in enumerate(held.failures_ms)
        if i > start and at_ms - held_since_ms >= hold_ms
    )
    assert len(held.failures_ms) == end + 1
    assert held.held_ms == held.bypass.bypassed_ms - held_since_ms
