"""Results on the wire, and handler answers that the coordinator could not accept."""

from __future__ import annotations

import json

import pytest

from streams.errors import InvalidInput
from streams.worker.api import HANDLER_ERROR, NO_DATA, Ack, Nack, Task
from streams.worker.results import (
    MAX_MESSAGE_CHARS,
    checked_outcome,
    decode_task,
    error_outcome,
    heartbeat_value,
    result_key,
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
    assert result_key(TASK) == "s1-é".encode()


def test_tasks_decode_from_utf8_json_and_anything_else_is_invalid() -> None:
    assert decode_task(json.dumps(TASK.to_wire()).encode()) == TASK
    for value in (None, b"\xff", b"{", b"[]", b'{"task_id": "x"}'):
        with pytest.raises(InvalidInput):
            decode_task(value)


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


def test_exception_texts_are_named_and_bounded() -> None:
    assert error_outcome(ValueError("bad")) == Nack(HANDLER_ERROR, "ValueError: bad")
    long = error_outcome(RuntimeError("x" * 5_000))
    assert len(long.message) == MAX_MESSAGE_CHARS + 1


def test_tasks_that_would_crash_the_loop_are_invalid() -> None:
    """A deeply nested value (RecursionError, not ValueError) and a stream id that cannot be
    a UTF-8 key would otherwise raise past the loop's ``InvalidInput`` guard, and every
    restart would crash on the same uncommitted task."""
    with pytest.raises(InvalidInput):
        decode_task(b"[" * 100_000)
    with pytest.raises(InvalidInput):
        decode_task(b'{"params": ' + b"[" * 100_000 + b"]}")
    surrogate = json.dumps({**TASK.to_wire(), "stream_id": "s\ud800"}).encode()
    with pytest.raises(InvalidInput, match="stream_id"):
        decode_task(surrogate)


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
