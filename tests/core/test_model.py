import json

import pytest
from msgspec.structs import replace

from streams.core import (
    BypassRecord,
    Commit,
    CommittedWindow,
    Decision,
    ErrorInfo,
    Result,
    Task,
)
from streams.core.model import to_json

from .helpers import at, started


def test_task_wire_has_exactly_the_issue_fields() -> None:
    state, (task,) = started(at(10, 1), params={"query": "up", "labels": {"env": "prod"}})
    wire = task.to_wire()
    assert wire == {
        "task_id": f"cluster-a/{at(10, 0)}/1",
        "stream_id": "cluster-a",
        "start_ms": at(10, 0),
        "end_ms": at(10, 1),
        "step_ms": 15_000,
        "attempt": 1,
        "dispatched_ms": at(10, 1),
        "deadline_ms": at(10, 2),
        "params": {"query": "up", "labels": {"env": "prod"}},
        "incarnation": state.incarnation,
    }
    assert 0 <= state.incarnation < 2**53
    assert json.loads(json.dumps(wire)) == wire
    assert isinstance(task, Task)


def test_commit_wire_lists_its_windows() -> None:
    commit = Commit("s", 300, 100, 999, (CommittedWindow(100, 200, "ack", 1),))
    assert commit.to_wire() == {
        "stream_id": "s",
        "downstream_ms": 300,
        "previous_ms": 100,
        "committed_ms": 999,
        "windows": [{"start_ms": 100, "end_ms": 200, "reason": "ack", "attempts": 1}],
    }


def test_bypass_record_wire_and_key() -> None:
    record = BypassRecord("s", 100, 200, 3, 150, 450, ErrorInfo("no_data", "empty"))
    assert record.key == "s/100"
    assert record.to_wire() == {
        "stream_id": "s",
        "start_ms": 100,
        "end_ms": 200,
        "attempts": 3,
        "first_failed_ms": 150,
        "bypassed_ms": 450,
        "last_error": {"kind": "no_data", "message": "empty"},
    }
    assert BypassRecord("s", 100, 200, 1, 150, 150, None).to_wire()["last_error"] is None


def test_the_values_crossing_the_boundary_are_frozen_and_the_plain_ones_hashable() -> None:
    _, (task,) = started(at(10, 1))
    window = CommittedWindow(100, 200, "ack", 1)
    values = [
        ErrorInfo("no_data", "empty"),
        Result("s", 100, 200, 1, "ack", 200),
        window,
        Commit("s", 200, 100, 999, (window,)),
        task,
        Decision(None, rejected="unknown stream"),
    ]
    for value in values:
        first = next(iter(type(value).__struct_fields__))
        with pytest.raises(AttributeError):
            setattr(value, first, getattr(value, first))
        assert replace(value) == value
    for value in values[:4]:  # a task's params and a decision's state are not hashable
        assert hash(value) == hash(replace(value))


def test_a_held_window_and_a_replay_task_keep_their_fields_on_the_wire() -> None:
    """`omit_defaults` leaves out only what holds its default: a held window's held_ms and a
    replay task's replay flag are written."""
    assert CommittedWindow(100, 200, "ack", 1, 5).to_wire()["held_ms"] == 5
    _, (task,) = started(at(10, 1))
    assert replace(task, replay=True).to_wire()["replay"] is True
    assert "replay" not in task.to_wire()


def test_a_task_carries_its_own_params_however_many_configs_come_and_go() -> None:
    """The params' JSON is kept per params object (`model._wire_builtin`): a config made after
    another was freed can get the same id, and must still encode its own params."""
    for n in range(12_000):  # past the cache's bound, so it is emptied on the way
        _, (task,) = started(at(10, 1), params={"n": n, "labels": {"i": str(n)}})
        assert json.loads(to_json(task))["params"] == {"n": n, "labels": {"i": str(n)}}
        del task
