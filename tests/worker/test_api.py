"""Decoding tasks from the wire: valid values round-trip, invalid ones name the field."""

from __future__ import annotations

from typing import Any

import pytest

from streams.errors import InvalidInput
from streams.worker.api import Task

WIRE: dict[str, Any] = {
    "task_id": "s1/1800000000000/1",
    "stream_id": "s1",
    "start_ms": 1_800_000_000_000,
    "end_ms": 1_800_000_060_000,
    "step_ms": 15_000,
    "attempt": 1,
    "dispatched_ms": 1_800_000_060_500,
    "deadline_ms": 1_800_000_120_500,
    "params": {"cluster_id": "c1"},
}


def test_a_valid_task_decodes_and_round_trips() -> None:
    task = Task.from_wire({**WIRE, "unknown_extra": True})

    assert task.end_ms == 1_800_000_060_000
    assert task.params == {"cluster_id": "c1"}
    assert task.replay is False
    assert Task.from_wire(task.to_wire()) == task
    assert task.to_wire() == WIRE  # "replay" only when true


def test_params_cannot_be_changed_by_a_handler() -> None:
    task = Task.from_wire(WIRE)

    with pytest.raises(TypeError):
        task.params["cluster_id"] = "c2"  # type: ignore[index]


def test_a_replay_task_is_marked() -> None:
    assert Task.from_wire({**WIRE, "replay": True}).replay is True


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"task_id": ""}, "task_id"),
        ({"stream_id": 7}, "stream_id"),
        ({"start_ms": "0"}, "start_ms"),
        ({"attempt": True}, "attempt"),
        ({"end_ms": 1_800_000_000_000}, "end_ms"),
        ({"step_ms": 0}, "step_ms"),
        ({"attempt": -1}, "attempt"),
        ({"params": []}, "params"),
        ({"replay": "yes"}, "replay"),
    ],
)
def test_an_invalid_field_is_named(change: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        Task.from_wire({**WIRE, **change})

    assert caught.value.field == field


@pytest.mark.parametrize("missing", ["task_id", "deadline_ms", "params"])
def test_a_missing_field_is_named(missing: str) -> None:
    value = {k: v for k, v in WIRE.items() if k != missing}

    with pytest.raises(InvalidInput) as caught:
        Task.from_wire(value)

    assert (caught.value.field, caught.value.reason) == (missing, "is required")


def test_a_value_that_is_not_an_object_is_rejected() -> None:
    with pytest.raises(InvalidInput) as caught:
        Task.from_wire(["not", "an", "object"])  # type: ignore[arg-type]

    assert caught.value.field == "task"
