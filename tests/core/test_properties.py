"""Property tests: random interleavings of results, timeouts, clock moves and flushes.

Several streams with random configs run side by side. After every decision the invariants of the
issue are checked; at the end every stream is flushed and its commits are checked to tile its
timeline, each interval closed by exactly one accepted ack or one bypass, and a replay of the same
inputs must decide exactly the same.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from streams.core import (
    BypassRecord,
    Commit,
    Decision,
    ErrorInfo,
    Exponential,
    Fixed,
    Immediate,
    Pause,
    Result,
    Resume,
    RetryPolicy,
    StreamConfig,
    StreamState,
    Task,
    Upsert,
    advance,
    announce,
    apply_control,
    apply_result,
    create_state,
    next_due_ms,
    retry_delay_ms,
    state_from_dict,
    state_from_row,
    state_to_dict,
    state_to_row,
)

from .helpers import T0

KINDS = ("no_data", "core_metric", "bad_query")
OUTCOMES = ("ack", "ack", "nack", "nack", "heartbeat")

retries = st.one_of(
    st.just(Immediate()),
    st.builds(Fixed, st.sampled_from([1, 1_000, 10_000, 60_000])),
    st.builds(
        Exponential,
        initial_ms=st.sampled_from([1, 500, 5_000]),
        multiplier=st.sampled_from([1.0, 1.5, 2.0, 3.0]),
        max_ms=st.sampled_from([5_000, 60_000]),
        jitter=st.sampled_from([0.0, 0.3, 1.0]),
    ),
)


@st.composite
def configs(draw: st.DrawFn, stream_id: str) -> StreamConfig:
    step_ms = draw(st.sampled_from([1_000, 5_000, 15_000]))
    return StreamConfig(
        stream_id=stream_id,
        start_ms=T0 + draw(st.integers(0, 600_000)),
        window_ms=step_ms * draw(st.integers(1, 4)),
        step_ms=step_ms,
        delay_ms=draw(st.sampled_from([0, 0, 2_000, 30_000])),
        task_timeout_ms=draw(st.sampled_from([5_000, 30_000, 60_000])),
        bypass_after_ms=draw(st.sampled_from([1, 20_000, 120_000, 300_000])),
        retry=draw(retries),
        max_attempts=draw(st.none() | st.integers(1, 5)),
        non_retryable=draw(st.sampled_from([frozenset(), frozenset({"bad_query"})])),
        max_in_flight=draw(st.integers(1, 4)),
    )


@dataclass
class Model:
    """What the test knows about one stream, independently of the core."""

    config: StreamConfig
    state: StreamState
    inputs: list[tuple[str, Any, int]] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    attempts: dict[tuple[int, int], int] = field(default_factory=dict)
    failures: dict[tuple[int, int, int], int] = field(default_factory=dict)
    policies: dict[tuple[int, int, int], RetryPolicy] = field(default_factory=dict)
    acks: list[tuple[int, int]] = field(default_factory=list)
    bypasses: list[BypassRecord] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    unflushed: int = 0  # intervals closed by an ack or a bypass and not yet flushed
    decisions: list[Decision] = field(default_factory=list)


def _apply(model: Model, kind: str, payload: Any, now_ms: int) -> Decision:
    """Run one input through the core and check every per-decision invariant."""
    state = model.state
    config = state.config
    before = state_to_dict(state)
    retried = {(w.start_ms, w.end_ms): w.retried_count for w in state.windows}
    downstream_before = state.downstream_ms
    if kind == "result":
        decision = apply_result(state, payload, now_ms)
    elif kind == "advance":
        decision = advance(state, now_ms)
    else:
        decision = apply_control(state, payload, now_ms)
    model.inputs.append((kind, payload, now_ms))
    model.decisions.append(decision)
    assert decision.state is state
    config = state.config

    if decision.rejected is not None or decision.ignored is not None:
        event(f"{kind} ignored as {decision.ignored}" if decision.ignored else f"{kind} rejected")
        assert decision.rejected is None or decision.ignored is None
        assert decision.ignored in (None, "stale", "duplicate")
        assert decision.tasks == () and decision.bypasses == ()
        assert state_to_dict(state) == before
        return decision

    if kind == "result" and payload.outcome == "ack":
        model.acks.append((payload.start_ms, payload.ack_ms))
        model.unflushed += 1
    for window in state.windows:  # remember when each failure happened, and under which policy
        key = (window.start_ms, window.end_ms)
        if window.retried_count > retried.get(key, 0):
            model.failures[(*key, window.retried_count)] = now_ms
            model.policies[(*key, window.retried_count)] = config.retry
    if decision.timeouts:
        event("timeout")
    if len(state.windows) > 1 and any(w.finished for w in state.windows):
        event("finished window waiting for the prefix")
    if any(w.start_ms != w.end_ms - config.window_ms and not w.finished for w in state.windows):
        event("remainder or restarted window outstanding")
    for bypass in decision.bypasses:
        event("bypass")
        _check_bypass_allowed(bypass, config, now_ms)
        model.bypasses.append(bypass)
        model.unflushed += 1
    for task in decision.tasks:
        _check_task(model, task, config, now_ms)
    _check_state(model, downstream_before)
    return decision


def _check_bypass_allowed(bypass: BypassRecord, config: StreamConfig, now_ms: int) -> None:
    assert bypass.bypassed_ms == now_ms and bypass.first_failed_ms <= now_ms
    assert bypass.last_error is not None
    assert (
        bypass.last_error.kind in config.non_retryable
        or (config.max_attempts is not None and bypass.attempts >= config.max_attempts)
        or now_ms - bypass.first_failed_ms >= config.bypass_after_ms
    )


def _check_task(model: Model, task: Task, config: StreamConfig, now_ms: int) -> None:
    key = (task.start_ms, task.end_ms)
    assert task.dispatched_ms == now_ms
    assert task.deadline_ms == now_ms + config.task_timeout_ms
    assert task.task_id == f"{task.stream_id}/{task.start_ms}/{task.attempt}"
    assert now_ms >= task.end_ms + config.delay_ms, "dispatched before end_ms + delay_ms"
    assert task.attempt == model.attempts.get(key, 0) + 1, "attempts are numbered 1, 2, ..."
    model.attempts[key] = task.attempt
    if task.attempt > 1:  # a retry: not before its retry delay
        failure = (*key, task.attempt - 1)
        policy = model.policies[failure]
        wait_ms = retry_delay_ms(policy, task.stream_id, task.start_ms, task.attempt - 1)
        assert now_ms >= model.failures[failure] + wait_ms, "retried before its delay"
    model.tasks.append(task)


def _check_state(model: Model, downstream_before: int) -> None:
    state = model.state
    assert state.downstream_ms >= downstream_before, "downstream_ms moved backwards"
    assert len(state.windows) <= state.config.max_in_flight
    pending = sum(len(window.closed) for window in state.windows)
    assert len(state.unannounced) + pending == model.unflushed, "a closed interval went missing"
    edge = state.announced_ms  # unannounced windows tile (announced_ms, downstream_ms]
    for done in state.unannounced:
        assert done.start_ms == edge < done.end_ms
        edge = done.end_ms
    assert edge == state.downstream_ms
    for window in state.windows:  # outstanding windows tile (downstream_ms, frontier_ms]
        for done in window.closed:
            assert done.start_ms == edge < done.end_ms
            edge = done.end_ms
        if window.finished:
            assert not window.in_flight
        else:
            assert window.start_ms == edge < window.end_ms
            edge = window.end_ms
    assert edge == state.frontier_ms
    assert state_from_dict(json.loads(json.dumps(state_to_dict(state)))) == state
    assert state_from_row(json.loads(json.dumps(state_to_row(state)))) == state


def _flush(model: Model, now_ms: int) -> None:
    _, commit = announce(model.state, now_ms)
    if commit is not None:
        model.commits.append(commit)
        model.unflushed -= len(commit.windows)
    assert model.state.unannounced == []


def _pick_result(data: st.DataObject, model: Model) -> Result:
    recent = model.tasks[-6:]
    task = data.draw(st.sampled_from(recent if data.draw(st.integers(0, 4)) else model.tasks))
    outcome = data.draw(st.sampled_from(OUTCOMES))
    attempt = task.attempt
    if outcome == "heartbeat":
        return Result(task.stream_id, task.start_ms, task.end_ms, attempt, "heartbeat")
    if outcome == "nack":
        error = ErrorInfo(data.draw(st.sampled_from(KINDS)), "from the property test")
        return Result(task.stream_id, task.start_ms, task.end_ms, attempt, "nack", error=error)
    step_ms = model.state.config.step_ms
    aligned = list(range(task.end_ms - task.end_ms % step_ms, task.start_ms, -step_ms))
    ack_ms = data.draw(
        st.one_of(
            st.just(task.end_ms),
            st.integers(task.start_ms + 1, task.end_ms),
            st.sampled_from(aligned) if aligned else st.just(task.end_ms),
        )
    )
    return Result(task.stream_id, task.start_ms, task.end_ms, attempt, "ack", ack_ms)


def _garbage(data: st.DataObject, model: Model) -> Result:
    start_ms = data.draw(st.integers(model.state.downstream_ms - 10, model.state.frontier_ms + 10))
    end_ms = start_ms + data.draw(st.integers(1, 120_000))
    attempt = data.draw(st.integers(1, 9))
    return Result(model.config.stream_id, start_ms, end_ms, attempt, "nack")


def _check_commits(model: Model, now_ms: int) -> None:
    """After a final flush: the commits tile the timeline, each interval closed exactly once."""
    _flush(model, now_ms)
    config = model.config
    edge = config.start_ms - config.start_ms % config.step_ms
    committed = []
    for commit in model.commits:
        assert commit.previous_ms == edge and commit.windows
        for done in commit.windows:
            assert done.start_ms == edge < done.end_ms, "gap or overlap in the committed timeline"
            assert done.reason in ("ack", "bypass") and done.attempts >= 1
            edge = done.end_ms
            committed.append(done)
        assert commit.downstream_ms == edge
    assert edge == model.state.downstream_ms
    pending = [done for window in model.state.windows for done in window.closed]
    closed = committed + pending
    acks = Counter((d.start_ms, d.end_ms) for d in closed if d.reason == "ack")
    bypassed = Counter((d.start_ms, d.end_ms) for d in closed if d.reason == "bypass")
    assert acks == Counter(model.acks), "each ack closes exactly one interval"
    assert bypassed == Counter((b.start_ms, b.end_ms) for b in model.bypasses)


def _replay(model: Model) -> None:
    """The same inputs at the same times decide exactly the same."""
    created = create_state(model.config, model.inputs[0][2])
    state = created.state
    assert state is not None
    replayed = [created]
    for kind, payload, now_ms in model.inputs[1:]:
        if kind == "result":
            replayed.append(apply_result(state, payload, now_ms))
        elif kind == "advance":
            replayed.append(advance(state, now_ms))
        else:
            replayed.append(apply_control(state, payload, now_ms))
    assert [(d.tasks, d.bypasses, d.rejected, d.ignored) for d in replayed] == [
        (d.tasks, d.bypasses, d.rejected, d.ignored) for d in model.decisions
    ]


OPS = ["tick", "jump", "jump", "advance", "result", "result", "result", "result", "garbage"]
OPS += ["flush", "pause", "resume", "upsert"]


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data(), stream_count=st.integers(1, 3), steps=st.integers(10, 80))
def test_random_interleavings_keep_every_invariant(
    data: st.DataObject, stream_count: int, steps: int
) -> None:
    now_ms = T0 + 900_000
    models = []
    for i in range(stream_count):
        config = data.draw(configs(f"stream-{i}"))
        created = create_state(config, now_ms)
        assert created.state is not None
        model = Model(config, created.state, [("create", config, now_ms)], decisions=[created])
        for task in created.tasks:
            _check_task(model, task, config, now_ms)
        models.append(model)

    for _ in range(steps):
        model = models[data.draw(st.integers(0, stream_count - 1))]
        op = data.draw(st.sampled_from(OPS))
        if op == "tick":
            now_ms += data.draw(st.sampled_from([0, 1, 999, 5_000, 15_000, 60_000, 300_000]))
        elif op == "jump":
            due_ms = next_due_ms(model.state)
            if due_ms is None:
                continue
            if due_ms > now_ms:
                quiet = _apply(model, "advance", None, due_ms - 1)
                assert quiet.tasks == () and quiet.timeouts == 0
                now_ms = due_ms
            moved = _apply(model, "advance", None, now_ms)
            assert moved.tasks or moved.timeouts, "next_due_ms promised a change"
            due_ms = next_due_ms(model.state)
            assert due_ms is None or due_ms > now_ms
        elif op == "advance":
            _apply(model, "advance", None, now_ms)
        elif op == "result" and model.tasks:
            _apply(model, "result", _pick_result(data, model), now_ms)
        elif op == "garbage":
            decision = _apply(model, "result", _garbage(data, model), now_ms)
            assert decision.rejected or decision.ignored or decision.state is model.state
        elif op == "flush":
            _flush(model, now_ms)
        elif op == "pause":
            _apply(model, "control", Pause(model.config.stream_id), now_ms)
        elif op == "resume":
            _apply(model, "control", Resume(model.config.stream_id), now_ms)
        elif op == "upsert":  # change how failures are handled; the windows' shape stays
            changed = StreamConfig(
                **{
                    **{name: getattr(model.config, name) for name in model.config.__slots__},
                    "retry": data.draw(retries),
                    "max_attempts": data.draw(st.none() | st.integers(1, 5)),
                    "bypass_after_ms": data.draw(st.sampled_from([1, 20_000, 300_000])),
                    "params": {"version": len(model.inputs)},
                }
            )
            _apply(model, "control", Upsert(changed), now_ms)

    for model in models:
        _check_commits(model, now_ms)
        _replay(model)
