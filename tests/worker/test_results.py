"""Results on the wire, and handler answers that the coordinator could not accept."""

from __future__ import annotations

import json

import pytest

from streams.core.lifecycle import TIMEOUT_KIND
from streams.core.model import NACK_WITHOUT_ERROR
from streams.wire import decode_result
from streams.worker.api import HANDLER_ERROR, NO_DATA, RESERVED_KINDS, SHUTDOWN, Ack, Nack, Task
from streams.worker.results import (
    MAX_MESSAGE_CHARS,
    checked_outcome,
    error_outcome,
    heartbeat_value,
    result_value,
)

TASK = Task(
    task_id="s1/1/1",
    stream_id="s1-é",
    start_ms=1_000,
    end_ms=61_000,
    step_ms=15_000,
    attempt=2,
    dispatched_ms=61_500,
    deadline_ms=121_500,
    params={},
)
HEAD = {"stream_id": "s1-é", "start_ms": 1_000, "end_ms": 61_000, "attempt": 2}


def test_results_echo_the_tasks_incarnation_when_it_has_one() -> None:
    task = _with_incarnation(4242)
    for value in (
        result_value(task, Ack(45_000)),
        result_value(task, Nack(NO_DATA, "empty")),
        heartbeat_value(task),
    ):
        assert json.loads(value)["incarnation"] == 4242
        assert decode_result(value).incarnation == 4242
    assert "incarnation" not in json.loads(result_value(TASK, Ack(45_000)))


def _with_incarnation(incarnation: int) -> Task:
    return Task(
        task_id=TASK.task_id,
        stream_id=TASK.stream_id,
        start_ms=TASK.start_ms,
        end_ms=TASK.end_ms,
        step_ms=TASK.step_ms,
        attempt=TASK.attempt,
        dispatched_ms=TASK.dispatched_ms,
        deadline_ms=TASK.deadline_ms,
        params=TASK.params,
        incarnation=incarnation,
    )


def test_acks_nacks_and_heartbeats_echo_the_attempt_they_answer() -> None:
    assert json.loads(result_value(TASK, Ack(45_000))) == {
        **HEAD,
        "outcome": "ack",
        "ack_ms": 45_000,
    }
    assert json.loads(result_value(TASK, Nack(NO_DATA, "empty"))) == {
        **HEAD,
        "outcome": "nack",
        "error": {"kind": NO_DATA, "message": "empty"},
    }
    assert json.loads(heartbeat_value(TASK)) == {**HEAD, "outcome": "heartbeat"}


def test_what_a_worker_answers_the_coordinator_decodes() -> None:
    ack = decode_result(result_value(TASK, Ack(45_000)))
    nack = decode_result(result_value(TASK, Nack(NO_DATA, "empty")))

    assert (ack.stream_id, ack.attempt, ack.outcome, ack.ack_ms) == ("s1-é", 2, "ack", 45_000)
    assert nack.error is not None and (nack.error.kind, nack.error.message) == (NO_DATA, "empty")
    assert decode_result(heartbeat_value(TASK)).outcome == "heartbeat"


def test_good_answers_pass_unchanged() -> None:
    assert checked_outcome(TASK, Ack(61_000)) == Ack(61_000)
    assert checked_outcome(TASK, Ack(1_001)) == Ack(1_001)
    assert checked_outcome(TASK, Nack(NO_DATA, "x")) == Nack(NO_DATA, "x")


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (Ack(1_000), "outside the window"),
        (Ack(61_001), "outside the window"),
        (Nack("", "no kind"), "empty or non-string kind"),
        (None, "returned NoneType"),
        ("ack", "returned str"),
    ],
)
def test_answers_the_coordinator_would_reject_become_handler_errors(
    answer: object, says: str
) -> None:
    outcome = checked_outcome(TASK, answer)

    assert isinstance(outcome, Nack) and outcome.kind == HANDLER_ERROR
    assert says in outcome.message


@pytest.mark.parametrize("kind", sorted(RESERVED_KINDS))
def test_a_kind_the_runtime_or_the_coordinator_sets_cannot_be_returned(kind: str) -> None:
    """Issue 25, item 6: a handler's `shutdown` read as a stopping worker (requeued at once,
    forever); `timeout` and `unknown` would pass for the coordinator's own."""
    outcome = checked_outcome(TASK, Nack(kind, "mine"))

    assert isinstance(outcome, Nack) and outcome.kind == HANDLER_ERROR
    assert outcome.message.startswith(f"the handler returned the reserved nack kind {kind!r}")
    assert outcome.message.endswith(": mine")


def test_the_reserved_kinds_are_those_the_runtime_and_the_core_set() -> None:
    assert {SHUTDOWN, HANDLER_ERROR, TIMEOUT_KIND, NACK_WITHOUT_ERROR.kind} == RESERVED_KINDS
    assert checked_outcome(TASK, Nack(NO_DATA, "none")) == Nack(NO_DATA, "none")


def test_exception_texts_are_named_and_bounded() -> None:
    assert error_outcome(ValueError("bad")) == Nack(HANDLER_ERROR, "ValueError: bad")
    long = error_outcome(RuntimeError("x" * 5_000))
    assert len(long.message) == MAX_MESSAGE_CHARS + 1


def test_an_exception_whose_text_raises_still_becomes_a_nack() -> None:
    """Else ``_call_handler`` raises past its guard: the job never gets an outcome, runs
    (and heartbeats) forever, and its partition's commits stop for good."""

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    outcome = error_outcome(Unprintable())

    assert outcome.kind == HANDLER_ERROR
    assert "Unprintable" in outcome.message


def test_a_nack_text_with_lone_surrogates_still_encodes() -> None:
    """An OS error text decoded with surrogateescape, or a handler's own kind or message,
    raised UnicodeEncodeError in the loop thread and killed the worker."""
    raised = result_value(TASK, error_outcome(OSError("bad name b\udcff")))
    answered = result_value(TASK, checked_outcome(TASK, Nack("kind\ud800", "text\udcff")))

    assert json.loads(raised.decode("utf-8"))["error"]["message"].startswith("OSError: bad")
    assert json.loads(answered.decode("utf-8"))["error"]["kind"].startswith("kind")


def test_results_say_the_workers_pipeline_not_the_tasks() -> None:
    for value in (
        result_value(TASK, Ack(45_000), "logs"),
        result_value(TASK, Nack(NO_DATA, "empty"), "logs"),
        heartbeat_value(TASK, "logs"),
    ):
        assert decode_result(value).pipeline == "logs"
    for value in (result_value(TASK, Ack(45_000)), heartbeat_value(TASK, "default")):
        assert "pipeline" not in json.loads(value)  # as a worker older than pipelines
