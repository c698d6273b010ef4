"""Routing (issue 28, item 1): a stream names its pipeline, its tasks say it, and a result from a
worker of another pipeline is rejected with a reason naming both."""

from __future__ import annotations

from typing import Any

import pytest
from msgspec.structs import replace as struct_replace

from streams.core import (
    BypassRecord,
    ErrorInfo,
    Result,
    StreamConfig,
    StreamState,
    apply_result,
    config_from_dict,
    config_to_dict,
    state_from_row,
    state_to_row,
)
from streams.core.codec import config_from_stored, config_to_stored
from streams.core.config import DEFAULT_PIPELINE, MAX_PIPELINE_CHARS, config_defaults
from streams.core.replay import ReplayState, note_bypass, on_result, request
from streams.core.results import incarnation_of, other_pipeline
from streams.errors import InvalidInput
from tests.core.helpers import ack, at, config, heartbeat, nack, started


def test_a_stream_belongs_to_the_default_pipeline_unless_it_names_one() -> None:
    assert DEFAULT_PIPELINE == "default"
    assert StreamConfig("s", 0).pipeline == "default"
    assert config_defaults()["pipeline"] == "default"
    assert StreamConfig("s", 0, pipeline="logs-export").pipeline == "logs-export"
    assert StreamConfig("s", 0, pipeline="x" * MAX_PIPELINE_CHARS).pipeline


@pytest.mark.parametrize(
    ("pipeline", "why"),
    [
        ("", "1 to"),
        ("x" * (MAX_PIPELINE_CHARS + 1), "1 to"),
        ("logs.export", "letters, digits"),  # it names a topic: '.' and '_' collide in metrics
        ("logs export", "letters, digits"),
        ("-logs", "letters, digits"),
        ("métriques", "letters, digits"),
        (7, "must be a string"),
        (None, "must be a string"),
    ],
)
def test_a_bad_pipeline_name_is_refused_naming_the_field(pipeline: Any, why: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        StreamConfig("s", 0, pipeline=pipeline)
    assert caught.value.field == "pipeline"
    assert why in str(caught.value)
    with pytest.raises(InvalidInput) as caught:
        config_from_dict({"stream_id": "s", "start_ms": 0, "pipeline": pipeline})
    assert caught.value.field == "pipeline"


def test_the_wire_dict_holds_a_pipeline_only_when_it_is_not_the_default() -> None:
    """So that a config of the default pipeline encodes, stores and hashes into its incarnation
    exactly as before pipelines existed."""
    plain = StreamConfig("s", 0)
    assert "pipeline" not in config_to_dict(plain)
    assert "pipeline" not in config_to_stored(plain)
    before = {**config_to_dict(plain)}
    assert incarnation_of(plain, 5) == incarnation_of(config_from_dict(before), 5)
    named = StreamConfig("s", 0, pipeline="logs")
    assert config_to_dict(named)["pipeline"] == "logs"
    assert config_from_dict(config_to_dict(named)) == named
    assert config_from_stored(config_to_stored(named)) == named
    assert incarnation_of(named, 5) != incarnation_of(plain, 5)


def test_a_state_stored_before_pipelines_decodes_as_the_default_pipeline() -> None:
    state, _ = started(at(10, 0))
    row = state_to_row(state)
    assert "pipeline" not in row[1]  # what an older coordinator stored
    decoded = state_from_row(row)
    assert decoded.config.pipeline == "default"
    named, _ = started(at(10, 0), pipeline="logs")
    assert state_from_row(state_to_row(named)).config.pipeline == "logs"


def test_a_task_says_its_streams_pipeline() -> None:
    _, tasks = started(at(10, 1), pipeline="logs")
    assert [task.pipeline for task in tasks] == ["logs"]
    _, tasks = started(at(10, 1))
    assert [task.pipeline for task in tasks] == ["default"]


def test_the_rule_names_both_pipelines_and_takes_none_as_the_default() -> None:
    assert other_pipeline("logs", "logs") is None
    assert other_pipeline(None, "default") is None
    reason = other_pipeline("metrics", "logs")
    assert reason is not None
    assert "'metrics'" in reason and "'logs'" in reason and reason.startswith("pipeline")
    reason = other_pipeline(None, "logs")
    assert reason is not None and "'default'" in reason and "'logs'" in reason
    assert "without" in reason  # says why a result that names none counts as default's


def test_a_result_from_a_worker_of_another_pipeline_is_rejected_and_changes_nothing() -> None:
    state, (task,) = started(at(10, 1), pipeline="logs")
    before = state_to_row(state)
    for result in (ack(task), nack(task), heartbeat(task)):
        for worker in ("metrics", None):
            decision = apply_result(state, struct_replace(result, pipeline=worker), at(10, 2))
            assert decision.rejected is not None and decision.rejected.startswith("pipeline")
            assert "'logs'" in decision.rejected
            assert state_to_row(state) == before
    decision = apply_result(state, struct_replace(ack(task), pipeline="logs"), at(10, 2))
    assert decision.rejected is None and state.downstream_ms == task.end_ms


def test_a_result_without_a_pipeline_is_the_default_pipelines() -> None:
    """An older worker sends none: a stream of the default pipeline takes its results."""
    state, (task,) = started(at(10, 1))
    assert ack(task).pipeline is None
    decision = apply_result(state, ack(task), at(10, 2))
    assert decision.rejected is None and state.downstream_ms == task.end_ms
    state, (task,) = started(at(10, 1))
    decision = apply_result(state, struct_replace(ack(task), pipeline="logs"), at(10, 2))
    assert decision.rejected is not None and "'logs'" in decision.rejected


def test_the_replay_lane_rejects_a_result_of_another_pipeline_too() -> None:
    live_config = config(pipeline="logs", task_timeout_ms=10_000)
    start = live_config.start_ms
    live = StreamState(live_config, start + 3_600_000, start, start + 3_600_000, incarnation=7)
    state = ReplayState("cluster-a")
    _, (task,) = started(at(10, 1), pipeline="logs")
    # the window, given up by the live lane after its first attempt
    given_up = ErrorInfo("no_data", "empty")
    bypass = BypassRecord("cluster-a", task.start_ms, task.end_ms, 5, task.end_ms,
                          task.end_ms + 1, given_up, dispatches=task.attempt)  # fmt: skip
    note_bypass(state, bypass)
    (replay,) = request(state, live, start, start + 3_600_000, 1, start + 3_600_000).tasks
    assert replay.pipeline == "logs"
    result = Result("cluster-a", replay.start_ms, replay.end_ms, replay.attempt, "ack",
                    ack_ms=replay.end_ms, pipeline="metrics")  # fmt: skip
    decision = on_result(state, live, result, 1, start + 3_600_001)
    assert decision is not None and (decision.rejected or "").startswith("pipeline")
    assert state.listed[0].attempt == replay.attempt  # nothing changed
    decision = on_result(state, live, struct_replace(result, pipeline="logs"), 1, start + 3_600_002)
    assert decision is not None and decision.rejected is None and len(decision.replayed) == 1
