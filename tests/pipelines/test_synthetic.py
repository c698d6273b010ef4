"""The synthetic pipeline: latency, reproducible failures and the outage switch."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from streams.errors import InvalidInput
from streams.pipelines.synthetic import SyntheticPipeline, draw
from streams.worker.api import Ack, Nack
from tests.pipelines.conftest import make_task

START_MS, END_MS = 1_800_000_000_000, 1_800_000_060_000


class RecordingSleep:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def test_acks_the_whole_window_by_default() -> None:
    assert SyntheticPipeline()(make_task(START_MS, END_MS, {})) == Ack(END_MS)


def test_latency_is_slept_before_answering() -> None:
    sleep = RecordingSleep()
    pipeline = SyntheticPipeline(latency_ms=250, sleep=sleep)

    pipeline(make_task(START_MS, END_MS, {}))
    pipeline(make_task(START_MS, END_MS, {"latency_ms": 40}))

    assert sleep.calls == [0.25, 0.04]


def test_latency_really_takes_time() -> None:
    began = time.monotonic()

    SyntheticPipeline(latency_ms=100)(make_task(START_MS, END_MS, {}))

    assert time.monotonic() - began >= 0.1


def test_failures_are_drawn_from_the_task_id_and_reproducible() -> None:
    pipeline = SyntheticPipeline(failure_probability=0.3)
    tasks = [make_task(START_MS + i * 60_000, END_MS + i * 60_000, {}) for i in range(400)]

    first = [pipeline(t) for t in tasks]
    again = [SyntheticPipeline(failure_probability=0.3)(t) for t in tasks]

    failed = [o for o in first if isinstance(o, Nack)]
    assert first == again
    assert {o.kind for o in failed} == {"synthetic_failure"}
    assert 80 <= len(failed) <= 160  # about 120 expected from 400 draws at 0.3
    assert all(
        isinstance(o, Nack) == (draw(t.task_id) < 0.3) for t, o in zip(tasks, first, strict=True)
    )


def test_a_retry_draws_again() -> None:
    pipeline = SyntheticPipeline(failure_probability=0.5)
    outcomes = {pipeline(make_task(START_MS, END_MS, {}, attempt=a)) for a in range(1, 30)}

    assert outcomes == {Ack(END_MS), Nack("synthetic_failure", "drawn failure (probability 0.5)")}


def test_params_override_the_failure_probability() -> None:
    pipeline = SyntheticPipeline(failure_probability=0.0)

    outcome = pipeline(make_task(START_MS, END_MS, {"failure_probability": 1}))

    assert isinstance(outcome, Nack)
    assert outcome.kind == "synthetic_failure"


def test_outage_until_a_time_nacks_before_it_and_acks_after() -> None:
    now_ms = [END_MS]
    pipeline = SyntheticPipeline(now_ms=lambda: now_ms[0])
    task = make_task(START_MS, END_MS, {"outage_until_ms": END_MS + 5_000})

    during = pipeline(task)
    now_ms[0] = END_MS + 5_000
    after = pipeline(task)

    assert during == Nack("outage", f"outage until {END_MS + 5_000}")
    assert after == Ack(END_MS)


def test_outage_file_switches_the_outage_on_and_off(tmp_path: Path) -> None:
    switch = tmp_path / "outage"
    pipeline = SyntheticPipeline(outage_file=switch)
    task = make_task(START_MS, END_MS, {})

    before = pipeline(task)
    switch.touch()
    during = pipeline(task)
    switch.unlink()
    after = pipeline(task)

    assert before == after == Ack(END_MS)
    assert isinstance(during, Nack)
    assert during.kind == "outage"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"latency_ms": -1}, "params.latency_ms"),
        ({"failure_probability": 1.5}, "params.failure_probability"),
        ({"outage_until_ms": "soon"}, "params.outage_until_ms"),
    ],
)
def test_bad_params_nack(params: dict[str, object], field: str) -> None:
    outcome = SyntheticPipeline()(make_task(START_MS, END_MS, params))

    assert isinstance(outcome, Nack)
    assert outcome.kind == "bad_params"
    assert outcome.message.startswith(f"{field}: ")


def test_bad_options_raise_naming_the_option() -> None:
    with pytest.raises(InvalidInput) as caught:
        SyntheticPipeline(failure_probability=2)

    assert caught.value.field == "options.failure_probability"
