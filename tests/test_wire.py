"""The wire contract: boundary decoders, committed JSON Schemas, and the core's outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec.structs
import pytest

from streams.core import (
    NACK_WITHOUT_ERROR,
    BypassRecord,
    Commit,
    CommittedWindow,
    Delete,
    ErrorInfo,
    Exponential,
    Fixed,
    Immediate,
    Pause,
    Replay,
    Result,
    Resume,
    StreamConfig,
    Task,
    Upsert,
    announce,
    apply_result,
    create_state,
)
from streams.core._checks import (
    MAX_DURATION_MS,
    MAX_ERROR_KIND_CHARS,
    MAX_ERROR_MESSAGE_CHARS,
    MAX_TIME_MS,
)
from streams.core.config import (
    MAX_IN_FLIGHT,
    MAX_NON_RETRYABLE,
    MAX_PARAMS_BYTES,
    MAX_PARAMS_DEPTH,
)
from streams.core.view import PublishedView, view_of
from streams.errors import InvalidInput
from streams.wire import (
    MAX_RAW_BYTES,
    SCHEMAS,
    Bypassed,
    BypassedMessage,
    CommitMessage,
    RejectedMessage,
    TaskMessage,
    Viewed,
    ViewMessage,
    bypassed_key,
    decode_bypassed,
    decode_commit,
    decode_control,
    decode_rejected,
    decode_result,
    decode_task,
    decode_view,
    encode_bypassed,
    encode_commit,
    encode_control,
    encode_result,
    encode_task,
    encode_view,
    json_schema,
    rejected_value,
    stream_key,
)

SCHEMA_DIR = Path(__file__).parents[1] / "schemas"
T0 = 1_795_946_400_000  # 2026-11-29T10:00:00Z
T1 = T0 + 60_000
T_END = 1_800_000_060_000


def raw(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields).encode()


def result_fields(**changes: Any) -> dict[str, Any]:
    fields = {"stream_id": "cluster-a", "start_ms": T0, "end_ms": T1, "attempt": 2}
    fields.update(changes)
    return {k: v for k, v in fields.items() if v is not None}


# -- decoding inputs -------------------------------------------------------------------------------


def test_decode_result_accepts_each_outcome_and_ignores_extra_fields() -> None:
    extra = {"worker": "w-7", "took_ms": 12, "nested": {"x": [1]}}

    ack = decode_result(raw(result_fields(outcome="ack", ack_ms=T1 - 1, **extra)))
    assert ack == Result("cluster-a", T0, T1, 2, "ack", ack_ms=T1 - 1)

    error = {"kind": "no_data", "message": "empty range", "retryable": True}
    nack = decode_result(raw(result_fields(outcome="nack", error=error, **extra)))
    assert nack == Result("cluster-a", T0, T1, 2, "nack", error=ErrorInfo("no_data", "empty range"))

    beat = decode_result(raw(result_fields(outcome="heartbeat", ack_ms="ignored", **extra)))
    assert beat == Result("cluster-a", T0, T1, 2, "heartbeat")


def test_a_nack_error_message_defaults_to_empty() -> None:
    nack = decode_result(raw(result_fields(outcome="nack", error={"kind": "timeout"})))
    assert nack.error == ErrorInfo("timeout", "")


def test_decode_control_builds_the_full_config_of_an_upsert() -> None:
    fields = {
        "type": "upsert",
        "stream_id": "cluster-a",
        "start_ms": T0,
        "window_ms": 120_000,
        "step_ms": 30_000,
        "delay_ms": 5_000,
        "task_timeout_ms": 90_000,
        "bypass_after_ms": 600_000,
        "retry": {
            "strategy": "exponential",
            "initial_ms": 1_000,
            "multiplier": 2,
            "max_ms": 8_000,
            "jitter": 0.25,
        },
        "max_attempts": 7,
        "non_retryable": ["auth", "bad_query"],
        "max_in_flight": 3,
        "params": {"query": "up", "labels": ["a"]},
        "comment": "extra fields are ignored",
    }
    assert decode_control(raw(fields)) == Upsert(
        StreamConfig(
            "cluster-a",
            T0,
            window_ms=120_000,
            step_ms=30_000,
            delay_ms=5_000,
            task_timeout_ms=90_000,
            bypass_after_ms=600_000,
            retry=Exponential(1_000, 2.0, 8_000, 0.25),
            max_attempts=7,
            non_retryable=frozenset({"auth", "bad_query"}),
            max_in_flight=3,
            params={"query": "up", "labels": ["a"]},
        )
    )


def test_an_upsert_takes_the_seed_defaults() -> None:
    control = decode_control(b'{"type": "upsert", "stream_id": "cluster-a", "start_ms": 0}')
    assert control == Upsert(StreamConfig("cluster-a", 0))
    assert isinstance(control, Upsert)
    assert control.config.retry == Fixed(60_000)
    immediate = decode_control(
        raw({"type": "upsert", "stream_id": "s", "start_ms": 0, "retry": {"strategy": "immediate"}})
    )
    assert isinstance(immediate, Upsert) and immediate.config.retry == Immediate()


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("pause", Pause("cluster-a")),
        ("resume", Resume("cluster-a")),
        ("delete", Delete("cluster-a")),
    ],
)
def test_decode_control_of_pause_resume_delete(kind: str, expected: object) -> None:
    assert (
        decode_control(raw({"type": kind, "stream_id": "cluster-a", "start_ms": "x"})) == expected
    )


BAD_RESULTS: list[tuple[str, bytes | None, str, str]] = [
    ("none", None, "value", "is empty"),
    ("bad json", b'{"stream_id": ', "value", "not valid JSON"),
    ("not utf-8", b"\xff\xfe{}", "value", "not valid JSON"),
    ("a list", b"[]", "value", "should be an object"),
    ("a number", b"42", "value", "should be an object"),
    ("no outcome", raw(result_fields()), "outcome", "is required; one of ack, nack, heartbeat"),
    (
        "unknown outcome",
        raw(result_fields(outcome="retry")),
        "outcome",
        "is not valid; one of ack, nack, heartbeat",
    ),
    ("outcome not a string", raw(result_fields(outcome=1)), "outcome", "is not valid"),
    (
        "missing stream_id",
        raw(result_fields(stream_id=None, outcome="heartbeat")),
        "stream_id",
        "Field required",
    ),
    (
        "empty stream_id",
        raw(result_fields(stream_id="", outcome="heartbeat")),
        "stream_id",
        "at least 1 character",
    ),
    (
        "long stream_id",
        raw(result_fields(stream_id="s" * 201, outcome="heartbeat")),
        "stream_id",
        "at most 200 characters",
    ),
    (
        "string for an int",
        raw(result_fields(start_ms=str(T0), outcome="heartbeat")),
        "start_ms",
        "valid integer",
    ),
    (
        "bool for an int",
        raw(result_fields(attempt=True, outcome="heartbeat")),
        "attempt",
        "valid integer",
    ),
    (
        "float for an int",
        raw(result_fields(end_ms=T1 + 0.5, outcome="heartbeat")),
        "end_ms",
        "valid integer",
    ),
    (
        "negative ms",
        raw(result_fields(start_ms=-1, outcome="heartbeat")),
        "start_ms",
        "greater than or equal to 0",
    ),
    (
        "attempt 0",
        raw(result_fields(attempt=0, outcome="heartbeat")),
        "attempt",
        "greater than or equal to 1",
    ),
    (
        "empty window",
        raw(result_fields(end_ms=T0, outcome="heartbeat")),
        "end_ms",
        "must be after start_ms",
    ),
    ("ack without ack_ms", raw(result_fields(outcome="ack")), "ack_ms", "Field required"),
    (
        "ack_ms null",
        raw(result_fields(outcome="ack", ack_ms=None) | {"ack_ms": None}),
        "ack_ms",
        "valid integer",
    ),
    ("nack without error", raw(result_fields(outcome="nack")), "error", "Field required"),
    (
        "error not an object",
        raw(result_fields(outcome="nack", error="boom")),
        "error",
        "should be an object",
    ),
    (
        "error kind empty",
        raw(result_fields(outcome="nack", error={"kind": ""})),
        "error.kind",
        "at least 1 character",
    ),
    (
        "error message a number",
        raw(result_fields(outcome="nack", error={"kind": "x", "message": 3})),
        "error.message",
        "valid string",
    ),
]


@pytest.mark.parametrize(
    ("value", "field", "reason"),
    [case[1:] for case in BAD_RESULTS],
    ids=[case[0] for case in BAD_RESULTS],
)
def test_decode_result_rejects_invalid_values_naming_the_field(
    value: bytes | None, field: str, reason: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_result(value)
    assert caught.value.field == field
    assert reason in caught.value.reason
    assert str(caught.value).startswith(f"{field}: ")


def upsert_fields(**changes: Any) -> dict[str, Any]:
    fields = {"type": "upsert", "stream_id": "cluster-a", "start_ms": T0}
    fields.update(changes)
    return {k: v for k, v in fields.items() if v is not None}


BAD_CONTROLS: list[tuple[str, bytes | None, str, str]] = [
    ("none", None, "value", "is empty"),
    ("bad json", b"{type: upsert}", "value", "not valid JSON"),
    ("a string", b'"upsert"', "value", "should be an object"),
    (
        "no type",
        b'{"stream_id": "cluster-a"}',
        "type",
        "is required; one of upsert, pause, resume, delete, replay",
    ),
    (
        "unknown type",
        b'{"type": "stop", "stream_id": "cluster-a"}',
        "type",
        "is not valid; one of upsert, pause, resume, delete, replay",
    ),
    ("pause without stream", b'{"type": "pause"}', "stream_id", "Field required"),
    ("upsert without start", raw(upsert_fields(start_ms=None)), "start_ms", "Field required"),
    ("string for an int", raw(upsert_fields(window_ms="60000")), "window_ms", "valid integer"),
    ("bool for an int", raw(upsert_fields(max_in_flight=True)), "max_in_flight", "valid integer"),
    ("zero duration", raw(upsert_fields(task_timeout_ms=0)), "task_timeout_ms", "greater than 0"),
    ("negative delay", raw(upsert_fields(delay_ms=-1)), "delay_ms", "greater than or equal to 0"),
    (
        "window not in steps",
        raw(upsert_fields(window_ms=50_000)),
        "window_ms",
        "must be a multiple of step_ms (15000)",
    ),
    (
        "retry without strategy",
        raw(upsert_fields(retry={})),
        "retry.strategy",
        "is required; one of immediate, fixed, exponential",
    ),
    (
        "unknown strategy",
        raw(upsert_fields(retry={"strategy": "linear"})),
        "retry.strategy",
        "is not valid; one of immediate, fixed, exponential",
    ),
    (
        "fixed without interval",
        raw(upsert_fields(retry={"strategy": "fixed"})),
        "retry.interval_ms",
        "Field required",
    ),
    (
        "multiplier below 1",
        raw(
            upsert_fields(
                retry={"strategy": "exponential", "initial_ms": 1, "multiplier": 0.5, "max_ms": 2}
            )
        ),
        "retry.multiplier",
        "greater than or equal to 1",
    ),
    (
        "max below initial",
        raw(
            upsert_fields(
                retry={"strategy": "exponential", "initial_ms": 5, "multiplier": 2, "max_ms": 2}
            )
        ),
        "retry.max_ms",
        "must be >= initial_ms (5)",
    ),
    (
        "infinite multiplier",
        b'{"type": "upsert", "stream_id": "s", "start_ms": 0, "retry": '
        b'{"strategy": "exponential", "initial_ms": 1, "multiplier": Infinity, "max_ms": 5}}',
        "retry.multiplier",
        "must be finite",
    ),
    (
        "non_retryable not strings",
        raw(upsert_fields(non_retryable=["auth", 3])),
        "non_retryable.1",
        "valid string",
    ),
    ("params not an object", raw(upsert_fields(params=[1])), "params", "should be an object"),
    (
        "max_attempts 0",
        raw(upsert_fields(max_attempts=0)),
        "max_attempts",
        "greater than or equal to 1",
    ),
]


@pytest.mark.parametrize(
    ("value", "field", "reason"),
    [case[1:] for case in BAD_CONTROLS],
    ids=[case[0] for case in BAD_CONTROLS],
)
def test_decode_control_rejects_invalid_values_naming_the_field(
    value: bytes | None, field: str, reason: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_control(value)
    assert caught.value.field == field
    assert reason in caught.value.reason


def test_an_upsert_with_an_unbounded_max_in_flight_is_rejected() -> None:
    try:
        decode_control(raw(upsert_fields(start_ms=0, max_in_flight=10**9)))
    except InvalidInput as exc:
        assert exc.field == "max_in_flight"
    else:
        raise AssertionError("max_in_flight=10**9 was accepted")


# -- bounds: what state, the codec or an output could not hold is turned away at upsert ----------


def rejection(value: bytes) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        decode_control(value)
    return caught.value


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"x": 2**70}, "params.x"),  # orjson cannot encode it: the task would be lost
        ({"x": 2**53}, "params.x"),
        ({"x": -(2**64)}, "params.x"),
        ({"a": {"b": [1, {"c": 2**60}]}}, "params.a.b.1.c"),
    ],
)
def test_an_upsert_with_an_integer_beyond_2_53_in_params_is_rejected(
    params: dict[str, Any], field: str
) -> None:
    caught = rejection(raw(upsert_fields(params=params)))
    assert (caught.field, caught.reason) == (field, "must be an integer within ±(2**53 - 1)")


def test_an_upsert_with_params_at_their_bounds_is_accepted_and_its_task_encodes() -> None:
    import orjson

    filler = "a" * (MAX_PARAMS_BYTES - len('{"n":9007199254740991,"s":""}'))
    params = {"n": 2**53 - 1, "s": filler}
    control = decode_control(raw(upsert_fields(start_ms=0, params=params)))
    assert isinstance(control, Upsert)
    (task,) = create_state(control.config, T0).tasks
    assert len(orjson.dumps(task.to_wire())) < MAX_PARAMS_BYTES + 1024  # far below 1 MiB
    caught = rejection(raw(upsert_fields(params={**params, "s": filler + "a"})))
    assert caught.field == "params"
    assert caught.reason == f"must encode to at most {MAX_PARAMS_BYTES} bytes of JSON, got 65537"


def test_an_upsert_with_params_nested_too_deep_is_rejected() -> None:
    nested = "[" * MAX_PARAMS_DEPTH + "]" * MAX_PARAMS_DEPTH
    value = b'{"type": "upsert", "stream_id": "s", "start_ms": 0, "params": {"x": %s}}'
    caught = rejection(value % nested.encode())
    assert caught.reason == f"must nest at most {MAX_PARAMS_DEPTH} levels deep"
    assert caught.field.startswith("params.x.0")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"retry": {"strategy": "fixed", "interval_ms": 2**53 - 1}}, "retry.interval_ms"),
        (
            {
                "retry": {
                    "strategy": "exponential",
                    "initial_ms": 1,
                    "multiplier": 2,
                    "max_ms": 2**53 - 1,
                }
            },
            "retry.max_ms",
        ),
        ({"delay_ms": 2**53 - 1}, "delay_ms"),
        ({"window_ms": 2**53 - 1, "step_ms": 1}, "window_ms"),
        ({"step_ms": MAX_DURATION_MS + 1}, "step_ms"),
        ({"task_timeout_ms": MAX_DURATION_MS + 1}, "task_timeout_ms"),
        ({"bypass_after_ms": 2**53 - 1}, "bypass_after_ms"),
        ({"start_ms": MAX_TIME_MS + 1}, "start_ms"),
        ({"max_attempts": 2**53}, "max_attempts"),
        ({"non_retryable": ["k" * (MAX_ERROR_KIND_CHARS + 1)]}, "non_retryable.0"),
        ({"non_retryable": [f"k{i}" for i in range(MAX_NON_RETRYABLE + 1)]}, "non_retryable"),
    ],
)
def test_an_upsert_past_a_bound_is_rejected_naming_the_field(
    changes: dict[str, Any], field: str
) -> None:
    # A retry interval of 2**53 - 1 used to be accepted: after one failure the state held a
    # due_ms the codec refused to read back, and the stream froze.
    assert rejection(raw(upsert_fields(**changes))).field == field


def test_an_upsert_at_every_duration_bound_is_accepted() -> None:
    at_bounds = upsert_fields(
        start_ms=MAX_TIME_MS - MAX_TIME_MS % 1_000,
        window_ms=MAX_DURATION_MS,
        step_ms=1_000,
        delay_ms=MAX_DURATION_MS,
        task_timeout_ms=MAX_DURATION_MS,
        bypass_after_ms=MAX_DURATION_MS,
        retry={"strategy": "fixed", "interval_ms": MAX_DURATION_MS},
        max_in_flight=MAX_IN_FLIGHT,
    )
    control = decode_control(raw(at_bounds))
    assert isinstance(control, Upsert) and control.config.delay_ms == MAX_DURATION_MS


def test_a_huge_nack_error_is_cut_not_rejected() -> None:
    error = {"kind": "k" * 1_000, "message": "m" * 1_000_000}
    nack = decode_result(raw(result_fields(outcome="nack", error=error)))
    assert nack.error is not None
    assert nack.error.kind == "k" * MAX_ERROR_KIND_CHARS
    assert len(nack.error.message) == MAX_ERROR_MESSAGE_CHARS
    assert nack.error.message == "m" * (MAX_ERROR_MESSAGE_CHARS - 1) + "…"


def test_a_nack_error_at_its_bounds_is_kept_whole() -> None:
    error = {"kind": "k" * MAX_ERROR_KIND_CHARS, "message": "é" * MAX_ERROR_MESSAGE_CHARS}
    nack = decode_result(raw(result_fields(outcome="nack", error=error)))
    assert nack.error == ErrorInfo(error["kind"], error["message"])


# -- the committed schemas -------------------------------------------------------------------------


def test_there_is_one_schema_file_per_topic() -> None:
    files = {path.name for path in SCHEMA_DIR.glob("*.schema.json")}
    assert files == {f"{topic}.schema.json" for topic in SCHEMAS}
    assert set(SCHEMAS) == {
        "control", "results", "tasks", "commits", "bypassed", "streams", "rejected", "health",
        "pipelines", "sources",
    }  # fmt: skip


@pytest.mark.parametrize("topic", sorted(SCHEMAS))
def test_the_schema_file_is_what_the_models_generate(topic: str) -> None:
    committed = json.loads((SCHEMA_DIR / f"{topic}.schema.json").read_text())
    assert committed == json_schema(topic), f"run: python -m streams.wire  (schemas/{topic})"
    assert committed["$schema"] == "https://json-schema.org/draft/2020-12/schema"


# -- the core's outputs match the output models ----------------------------------------------------


def core_outputs() -> tuple[Task, Commit, BypassRecord]:
    """A task, a commit and a bypass record as the core renders them."""
    config = StreamConfig("cluster-a", T0, max_attempts=1, max_in_flight=2, params={"q": "up"})
    decision = create_state(config, T0 + 300_000)
    state = decision.state
    assert state is not None
    first, second = decision.tasks
    apply_result(state, Result("cluster-a", T0, T1, 1, "ack", T1), T0 + 300_000)
    error = ErrorInfo("no_data", "nothing")
    bypassed = apply_result(
        state, Result("cluster-a", T1, second.end_ms, 1, "nack", error=error), T0 + 300_000
    )
    (bypass,) = bypassed.bypasses
    _, commit = announce(state, T0 + 300_000)
    assert commit is not None and [w.reason for w in commit.windows] == ["ack", "bypass"]
    return first, commit, bypass


def assert_matches(model: type[Any], wire: dict[str, Any]) -> None:
    """`wire` validates against `model`, also as JSON, and the model keeps every field."""
    assert model.model_validate(wire).model_dump(exclude_unset=True) == wire
    assert model.model_validate_json(json.dumps(wire)).model_dump(exclude_unset=True) == wire


def test_a_task_validates_against_the_tasks_model() -> None:
    task, _, _ = core_outputs()
    assert_matches(TaskMessage, task.to_wire())


def test_a_commit_validates_against_the_commits_model() -> None:
    _, commit, _ = core_outputs()
    assert_matches(CommitMessage, commit.to_wire())


def test_a_bypass_record_validates_against_the_bypassed_model() -> None:
    _, _, bypass = core_outputs()
    assert_matches(BypassedMessage, bypass.to_wire())
    without_error = BypassRecord("cluster-a", T0, T1, 0, T1, T1 + 1, None)
    assert_matches(BypassedMessage, without_error.to_wire())


def test_a_rejected_record_validates_against_the_rejected_model() -> None:
    value = b'{"x": "' + "é".encode() * 3000 + b'"}'
    rejected = json.loads(rejected_value("tidemark.results", 3, 41, "x: bad", b"cluster-a", value))
    assert_matches(RejectedMessage, rejected)
    assert rejected["value"] == value[:MAX_RAW_BYTES].decode("utf-8", "replace")
    assert (rejected["partition"], rejected["offset"], rejected["key"]) == (3, 41, "cluster-a")

    empty = json.loads(rejected_value("tidemark.control", 0, 0, "value: is empty", None, None))
    assert_matches(RejectedMessage, empty)
    assert (empty["key"], empty["value"]) == (None, None)


def test_the_output_models_refuse_what_the_core_never_emits() -> None:
    _, commit, _ = core_outputs()
    wire = commit.to_wire()
    wire["windows"][0]["reason"] = "timeout"
    with pytest.raises(ValueError, match="reason"):
        CommitMessage.model_validate(wire)
    with pytest.raises(ValueError, match="attempt"):
        TaskMessage.model_validate({**core_outputs()[0].to_wire(), "attempt": 0})
    with pytest.raises(ValueError, match="downstream_ms"):
        CommitMessage.model_validate({**commit.to_wire(), "downstream_ms": "1"})
    assert CommittedWindow(T0, T1, "ack", 1).to_wire() == {
        "start_ms": T0,
        "end_ms": T1,
        "reason": "ack",
        "attempts": 1,
    }


# -- the codec, both directions: what one side writes, the other reads ---------------------------

TASK_FIELDS: dict[str, Any] = {
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


def test_a_task_round_trips_and_its_params_are_read_only() -> None:
    task, _, _ = core_outputs()
    assert decode_task(encode_task(task)) == task

    decoded = decode_task(raw({**TASK_FIELDS, "unknown_extra": True}))
    assert (decoded.end_ms, decoded.params, decoded.replay) == (T_END, {"cluster_id": "c1"}, False)
    assert json.loads(encode_task(decoded)) == TASK_FIELDS  # "replay" only when true
    assert decode_task(raw({**TASK_FIELDS, "replay": True})).replay is True
    with pytest.raises(TypeError):
        decoded.params["cluster_id"] = "c2"  # type: ignore[index]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"task_id": ""}, "task_id"),
        ({"stream_id": 7}, "stream_id"),
        ({"start_ms": "0"}, "start_ms"),
        ({"attempt": True}, "attempt"),
        ({"end_ms": 1_800_000_000_000}, "end_ms"),
        ({"step_ms": 0}, "step_ms"),
        ({"attempt": 0}, "attempt"),
        ({"params": []}, "params"),
        ({"replay": "yes"}, "replay"),
        ({"task_id": None}, "task_id"),
        ({"deadline_ms": None}, "deadline_ms"),
        ({"params": None}, "params"),
    ],
)
def test_decode_task_names_the_invalid_or_missing_field(change: dict[str, Any], field: str) -> None:
    fields = {k: v for k, v in {**TASK_FIELDS, **change}.items() if v is not None}
    with pytest.raises(InvalidInput) as caught:
        decode_task(raw(fields))
    assert caught.value.field == field
    if field not in fields:
        assert caught.value.reason == "Field required"


@pytest.mark.parametrize(
    "value",
    [
        None,
        b"\xff",
        b"[]",
        b"[" * 100_000,  # too deep: refused as JSON, not a RecursionError out of the loop
        b'{"params": ' + b"[" * 100_000 + b"]}",
        json.dumps({**TASK_FIELDS, "stream_id": "s\ud800"}).encode(),  # no UTF-8 result key
    ],
)
def test_a_task_value_that_is_no_json_object_is_invalid(value: bytes | None) -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_task(value)
    assert caught.value.field == "value"


def test_each_result_round_trips() -> None:
    error = ErrorInfo("no_data", "empty")
    for result in (
        Result("s-é", T0, T1, 2, "ack", ack_ms=T1 - 1),
        Result("s-é", T0, T1, 2, "nack", error=error),
        Result("s-é", T0, T1, 2, "heartbeat"),
    ):
        assert decode_result(encode_result(result)) == result
    nack = decode_result(encode_result(Result("s", T0, T1, 1, "nack")))
    assert nack.error == NACK_WITHOUT_ERROR
    with pytest.raises(InvalidInput, match="ack_ms"):
        encode_result(Result("s", T0, T1, 1, "ack"))


def test_incarnation_rides_on_tasks_and_results_and_may_be_absent() -> None:
    task = decode_task(raw({**TASK_FIELDS, "incarnation": 12345}))
    assert task.incarnation == 12345
    assert json.loads(encode_task(task))["incarnation"] == 12345
    assert decode_task(raw(TASK_FIELDS)).incarnation is None  # from a coordinator without them
    for result in (
        Result("s", T0, T1, 2, "ack", ack_ms=T1, incarnation=7),
        Result("s", T0, T1, 2, "nack", error=ErrorInfo("k", "m"), incarnation=7),
        Result("s", T0, T1, 2, "heartbeat", incarnation=0),
    ):
        value = encode_result(result)
        assert json.loads(value)["incarnation"] == result.incarnation
        assert decode_result(value) == result
    assert "incarnation" not in json.loads(encode_result(Result("s", T0, T1, 2, "heartbeat")))
    assert decode_result(raw(result_fields(outcome="heartbeat"))).incarnation is None


@pytest.mark.parametrize("bad", ["7", -1, 2**53, 1.5, True])
def test_a_bad_incarnation_is_rejected_naming_the_field(bad: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_result(raw(result_fields(outcome="heartbeat", incarnation=bad)))
    assert caught.value.field == "incarnation"
    with pytest.raises(InvalidInput) as caught:
        decode_task(raw({**TASK_FIELDS, "incarnation": bad}))
    assert caught.value.field == "incarnation"


def test_a_result_with_lone_surrogates_in_its_error_still_encodes() -> None:
    value = encode_result(Result("s", T0, T1, 1, "nack", error=ErrorInfo("k\ud800", "t\udcff")))
    assert decode_result(value).error == ErrorInfo("k?", "t?")


def test_each_control_round_trips() -> None:
    config = StreamConfig("cluster-a", T0, retry=Exponential(1000, 2.0, 60_000, 0.1))
    for control in (
        Upsert(config),
        Upsert(config, paused=True),
        Pause("cluster-a"),
        Resume("cluster-a"),
        Delete("cluster-a"),
        Replay("cluster-a", T0, T1),
    ):
        assert decode_control(encode_control(control)) == control
    with pytest.raises(ValueError):
        encode_control(Upsert(StreamConfig("s", T0, params={"x": float("nan")})))


def test_commits_round_trip_and_name_the_invalid_field() -> None:
    _, commit, _ = core_outputs()
    assert decode_commit(encode_commit(commit)) == commit
    wire = commit.to_wire()
    wire["windows"][1]["reason"] = "timeout"
    with pytest.raises(InvalidInput) as caught:
        decode_commit(raw(wire))
    assert caught.value.field == "windows.1.reason"


def test_bypassed_records_round_trip_under_their_key_and_tombstones_keep_it() -> None:
    _, _, bypass = core_outputs()
    key = bypassed_key(bypass.stream_id, bypass.start_ms)
    assert key == f"cluster-a/{bypass.start_ms}".encode() == bypass.key.encode()
    assert decode_bypassed(key, encode_bypassed(bypass)) == ("cluster-a", bypass.start_ms, bypass)
    assert decode_bypassed(b"a/b/7", None) == Bypassed("a/b", 7, None)  # "/" in a stream id


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        (None, "is required"),
        (b"\xff/1", "is not UTF-8"),
        (b"cluster-a", "must be {stream_id}/{start_ms}"),
        (b"cluster-a/x", "must be {stream_id}/{start_ms}"),
        (b"other/1", "must be the value's {stream_id}/{start_ms}"),
    ],
)
def test_a_bypassed_key_that_is_not_its_window_is_named(key: bytes | None, reason: str) -> None:
    _, _, bypass = core_outputs()
    with pytest.raises(InvalidInput) as caught:
        decode_bypassed(key, encode_bypassed(bypass))
    assert caught.value.field == "key" and reason in caught.value.reason


def _view() -> PublishedView:
    config = StreamConfig("cluster-a", T0, max_in_flight=2, params={"q": "up"})
    decision = create_state(config, T0 + 300_000)
    assert decision.state is not None
    return view_of(decision.state, 3, T0 + 200_000, T0 + 300_000)


def test_a_view_round_trips_under_its_key_and_a_tombstone_names_its_stream() -> None:
    view = _view()
    raw = encode_view(view)
    assert ViewMessage.model_validate_json(raw).stream_id == "cluster-a"
    assert decode_view(b"cluster-a", raw) == Viewed("cluster-a", view)
    assert decode_view(b"cluster-a", None) == Viewed("cluster-a", None)
    assert json.loads(raw)["window"] == {"start_ms": T0, "end_ms": T0 + 60_000}
    assert "held_since_ms" not in json.loads(raw)  # only while a window is held
    held = msgspec.structs.replace(view, held_since_ms=T0 + 250_000)
    assert json.loads(encode_view(held))["held_since_ms"] == T0 + 250_000
    assert decode_view(b"cluster-a", encode_view(held)) == Viewed("cluster-a", held)


@pytest.mark.parametrize(
    ("key", "change", "field", "reason"),
    [
        (None, {}, "key", "is required"),
        (b"\xff", {}, "key", "is not UTF-8"),
        (b"other", {}, "key", "must be the value's stream_id"),
        (b"cluster-a", {"status": "asleep"}, "status", "Input should be"),
        (b"cluster-a", {"attempt": -1}, "attempt", "greater than or equal to 0"),
        (b"cluster-a", {"config": {"stream_id": "cluster-a"}}, "config.start_ms", "required"),
        (b"cluster-a", {"config": {"stream_id": "x", "start_ms": T0}}, "config.stream_id", "view"),
        (b"cluster-a", {"downstream_ms": "1"}, "downstream_ms", "integer"),
    ],
)
def test_a_bad_view_is_refused_naming_the_field(
    key: bytes | None, change: dict[str, Any], field: str, reason: str
) -> None:
    wire = {**json.loads(encode_view(_view())), **change}
    with pytest.raises(InvalidInput) as caught:
        decode_view(key, json.dumps(wire).encode())
    assert caught.value.field == field and reason in caught.value.reason


def test_rejected_records_decode() -> None:
    value = rejected_value("tidemark.results", 3, 41, "x: bad", b"k", b"v")
    assert decode_rejected(value).model_dump() == {
        "source_topic": "tidemark.results",
        "partition": 3,
        "offset": 41,
        "reason": "x: bad",
        "key": "k",
        "value": "v",
    }
    with pytest.raises(InvalidInput, match="offset"):
        decode_rejected(b'{"source_topic": "t", "partition": 0, "reason": "r", "key": null}')


def test_stream_keys_are_the_stream_id_as_utf8() -> None:
    assert stream_key("s-é") == "s-é".encode()


def test_pipeline_rides_on_tasks_and_results_and_absent_is_the_default() -> None:
    task = decode_task(raw({**TASK_FIELDS, "pipeline": "logs"}))
    assert task.pipeline == "logs"
    assert json.loads(encode_task(task))["pipeline"] == "logs"
    assert decode_task(encode_task(task)) == task
    old = decode_task(raw(TASK_FIELDS))  # from a coordinator without pipelines
    assert old.pipeline == "default"
    assert "pipeline" not in json.loads(encode_task(old))  # a default task keeps its bytes
    for result in (
        Result("s", T0, T1, 2, "ack", ack_ms=T1, pipeline="logs"),
        Result("s", T0, T1, 2, "nack", error=ErrorInfo("k", "m"), pipeline="logs"),
        Result("s", T0, T1, 2, "heartbeat", incarnation=3, pipeline="default"),
    ):
        value = encode_result(result)
        assert json.loads(value)["pipeline"] == result.pipeline
        assert decode_result(value) == result
    assert "pipeline" not in json.loads(encode_result(Result("s", T0, T1, 2, "heartbeat")))
    assert decode_result(raw(result_fields(outcome="heartbeat"))).pipeline is None


@pytest.mark.parametrize("bad", ["", "a.b", "x" * 65, 7])
def test_a_bad_pipeline_is_rejected_naming_the_field(bad: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_result(raw({**result_fields(outcome="heartbeat"), "pipeline": bad}))
    assert caught.value.field == "pipeline"
    with pytest.raises(InvalidInput) as caught:
        decode_task(raw({**TASK_FIELDS, "pipeline": bad}))
    assert caught.value.field == "pipeline"


def test_a_result_encodes_to_the_bytes_json_dumps_makes() -> None:
    """The encoder in C (the worker's hot path) writes what json.dumps wrote before it."""
    for result in (
        Result("s", T0, T1, 1, "ack", ack_ms=T1),
        Result("s", T0, T1, 2, "heartbeat", incarnation=3, pipeline="logs"),
        Result("é/ü", T0, T1, 1, "nack", error=ErrorInfo("k", 'é\u2028\x01"\\/<>&\u00a0😀')),
    ):
        encoded = encode_result(result)
        value = json.loads(encoded)  # the same keys, in the same order
        assert encoded == json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
