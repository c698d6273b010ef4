"""Admission never strands a stream: whatever the answers, their order, timeouts and restarts
(a paced recovery each), once the worker answers everything every stream of the source catches
up. Two chaos runs saw the contrary (a stream of a source in paced recovery never dispatched
again, while the others caught up): the slots freed by answers went to the streams decided
next, never to one waiting with nothing in flight."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.admission import SourceLimits

from .fakes import T0, Driver, ack, nack
from .test_admission import answer_all, gated, in_flight, step

SECOND_MS = 1_000
STREAMS = 6

limits = st.sampled_from([{}, {"S": SourceLimits("S", max_in_flight=3)}])
stream_plans = st.lists(
    st.tuples(st.integers(0, 60), st.integers(1, 4)),  # seconds behind, max_in_flight
    min_size=STREAMS,
    max_size=STREAMS,
)
# Per step: which of the tasks in flight are answered (a bit each, in this order or reversed),
# whether as nacks, and whether the coordinator restarts before the step.
steps = st.lists(
    st.tuples(st.integers(0, 255), st.booleans(), st.booleans(), st.integers(0, 19)),
    min_size=1,
    max_size=40,
)


@settings(max_examples=30, deadline=None)
@given(limits, stream_plans, steps)
def test_every_stream_of_a_gated_source_catches_up_once_answers_come(
    source_limits: dict[str, SourceLimits],
    plans: list[tuple[int, int]],
    script: list[tuple[int, bool, bool, int]],
) -> None:
    now_ms = T0 + 120 * SECOND_MS + 500
    d = gated(source_limits)
    config: dict[str, Any] = {"window_ms": SECOND_MS, "step_ms": SECOND_MS,
                              "task_timeout_ms": 3_000, "bypass_after_ms": 600_000,
                              "retry": {"strategy": "fixed", "interval_ms": 500}}  # fmt: skip
    streams = [f"s-{i}" for i in range(STREAMS)]
    for stream_id, (behind_s, most) in zip(streams, plans, strict=True):
        d.upsert(stream_id, now_ms, source="S", start_ms=now_ms - 500 - behind_s * SECOND_MS,
                 max_in_flight=most, **config)  # fmt: skip
    answered: set[str] = set()
    for mask, reverse, nacks, roll in script:
        if roll == 0:  # a restart: a new process over the same table, paced from its backlog
            d = restart(d, source_limits)  # the worker still holds the tasks it was given
        now_ms += 250
        step(d, now_ms)
        check_cap(d, source_limits)
        flying = in_flight(d, answered)
        if reverse:
            flying.reverse()
        for bit, task in enumerate(flying):
            if mask >> (bit % 8) & 1:
                answered.add(task["task_id"])
                d.result(nack(task) if nacks else ack(task), now_ms)
    for _ in range(240):  # one minute of a worker that answers everything at once
        now_ms += 250
        step(d, now_ms)
        check_cap(d, source_limits)
        answer_all(d, answered, now_ms)
    # Caught up, or still catching up (at 3 slots, 60 s may not do): dispatched lately.
    marks = {c["stream_id"]: c["downstream_ms"] for c in d.commits()}
    lately = {t["stream_id"] for t in d.tasks() if t["dispatched_ms"] >= now_ms - 5_000}
    stranded = {s: now_ms - marks.get(s, 0) for s in streams
                if now_ms - marks.get(s, 0) > 5_000 and s not in lately}  # fmt: skip
    assert not stranded, stranded


def restart(d: Driver, source_limits: dict[str, SourceLimits]) -> Driver:
    again = gated(source_limits, store=d.store)
    again.emitter.sent.extend(d.emitter.sent)  # the topics outlive the process
    return again


def check_cap(d: Driver, source_limits: dict[str, SourceLimits]) -> None:
    gates = d.processor.admission.gates  # type: ignore[union-attr]
    for source, limit in source_limits.items():
        if source in gates and limit.max_in_flight is not None:
            assert sum(gates[source].in_flight) <= limit.max_in_flight
