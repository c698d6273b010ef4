"""Incarnations: a result for a stream before its delete and re-create counts for nothing."""

from __future__ import annotations

import pytest
from msgspec.structs import replace

from streams.core import (
    Delete,
    StreamState,
    Task,
    Upsert,
    apply_control,
    apply_result,
    state_from_dict,
    state_to_dict,
)
from streams.core.results import incarnation_of
from streams.errors import InvalidInput

from .helpers import ack, at, config, heartbeat, nack, started


def _recreated() -> tuple[Task, StreamState, Task]:
    """The old stream's task for (10:00, 10:01], and the re-created stream with its own."""
    old_state, (old_task,) = started(at(10, 1))
    deleted = apply_control(old_state, Delete("cluster-a"), at(10, 1, 10))
    assert deleted.state is not None and deleted.state.deleted_ms == at(10, 1, 10)
    assert deleted.rejected is None
    new = apply_control(deleted.state, Upsert(config(non_retryable=("no_data",))), at(10, 1, 20))
    assert new.state is not None and len(new.tasks) == 1
    return old_task, new.state, new.tasks[0]


def test_an_old_incarnations_ack_is_rejected_naming_the_field_and_changes_nothing() -> None:
    old_task, state, new_task = _recreated()
    assert old_task.incarnation != new_task.incarnation == state.incarnation
    before = state_to_dict(state)
    stale = replace(ack(old_task), incarnation=old_task.incarnation)
    decision = apply_result(state, stale, at(10, 1, 30))
    assert decision.rejected is not None and decision.rejected.startswith("incarnation ")
    assert state_to_dict(state) == before and decision.tasks == ()


def test_an_old_incarnations_non_retryable_nack_does_not_bypass_the_new_stream() -> None:
    old_task, state, _ = _recreated()
    stale = replace(nack(old_task, "no_data"), incarnation=old_task.incarnation)
    decision = apply_result(state, stale, at(10, 1, 30))
    assert decision.rejected is not None and "incarnation" in decision.rejected
    assert decision.bypasses == ()
    assert state.windows[0].in_flight and state.downstream_ms == at(10, 0)


def test_the_current_incarnation_and_a_result_without_one_both_count() -> None:
    _, state, task = _recreated()
    deadline_ms = state.windows[0].deadline_ms
    echoed = replace(heartbeat(task), incarnation=task.incarnation)
    assert apply_result(state, echoed, at(10, 1, 30)).rejected is None
    assert state.windows[0].deadline_ms != deadline_ms
    legacy = ack(task)  # no incarnation: a worker from before them
    assert legacy.incarnation is None
    assert apply_result(state, legacy, at(10, 1, 40)).rejected is None
    assert state.downstream_ms == at(10, 1)


def test_an_incarnation_comes_from_the_creating_upsert_alone_and_survives_reconfiguring() -> None:
    assert incarnation_of(config(), at(10, 1)) == incarnation_of(config(), at(10, 1))
    assert incarnation_of(config(), at(10, 1)) != incarnation_of(config(), at(10, 1) + 1)
    assert incarnation_of(config(), at(10, 1)) != incarnation_of(
        config(window_ms=30_000), at(10, 1)
    )
    state, _ = started(at(10, 1))
    first = state.incarnation
    assert 0 <= first < 2**53
    apply_control(state, Upsert(config(bypass_after_ms=600_000)), at(10, 2))
    assert state.incarnation == first


def test_the_codec_keeps_the_incarnation_and_reads_old_states_without_it() -> None:
    state, _ = started(at(10, 1))
    doc = state_to_dict(state)
    assert doc["incarnation"] == state.incarnation
    assert state_from_dict(doc) == state
    del doc["incarnation"]  # a state stored before incarnations
    assert state_from_dict(doc).incarnation == 0
    with pytest.raises(InvalidInput, match="incarnation"):
        state_from_dict({**doc, "incarnation": "7"})
