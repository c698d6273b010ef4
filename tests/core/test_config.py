import json
from typing import Any

import pytest

from streams.core import (
    Exponential,
    Fixed,
    Immediate,
    StreamConfig,
    config_from_dict,
    config_to_dict,
)
from streams.core._checks import MAX_DURATION_MS, MAX_ERROR_KIND_CHARS, MAX_TIME_MS
from streams.core.config import (
    MAX_NON_RETRYABLE,
    MAX_PARAMS_BYTES,
    MAX_PARAMS_DEPTH,
    check_params,
)
from streams.errors import InvalidInput


def test_defaults_follow_the_issue_table() -> None:
    config = StreamConfig("s", 0)
    assert config.window_ms == 60_000
    assert config.step_ms == 15_000
    assert config.delay_ms == 0
    assert config.task_timeout_ms == 60_000
    assert config.bypass_after_ms == 300_000
    assert config.retry == Fixed(60_000)
    assert config.max_attempts is None
    assert config.non_retryable == frozenset()
    assert config.max_in_flight == 1
    assert dict(config.params) == {}
    assert config.end_ms is None  # unbounded
    assert config.gc_grace_ms == 48 * 3_600_000
    assert config.bypass_retention_ms == 30 * 86_400_000


def test_config_is_frozen_hashable_and_params_are_a_read_only_copy() -> None:
    params = {"query": "up"}
    config = StreamConfig("s", 0, params=params)
    params["query"] = "down"
    assert config.params["query"] == "up"
    with pytest.raises(TypeError):
        config.params["query"] = "x"  # type: ignore[index]
    with pytest.raises(AttributeError):
        config.window_ms = 1  # type: ignore[misc]
    assert hash(config) == hash(StreamConfig("s", 0, params={"other": 1}))


def test_non_retryable_accepts_any_collection_of_kinds() -> None:
    assert StreamConfig("s", 0, non_retryable={"a", "b"}).non_retryable == {"a", "b"}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"stream_id": ""}, "stream_id"),
        ({"stream_id": "x" * 201}, "stream_id"),
        ({"stream_id": 7}, "stream_id"),
        ({"start_ms": -1}, "start_ms"),
        ({"start_ms": 1.5}, "start_ms"),
        ({"start_ms": True}, "start_ms"),
        ({"window_ms": 0}, "window_ms"),
        ({"window_ms": 20_000}, "window_ms"),
        ({"step_ms": 0}, "step_ms"),
        ({"step_ms": -15_000}, "step_ms"),
        ({"delay_ms": -1}, "delay_ms"),
        ({"task_timeout_ms": 0}, "task_timeout_ms"),
        ({"bypass_after_ms": 0}, "bypass_after_ms"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": False}, "max_attempts"),
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"non_retryable": "timeout"}, "non_retryable"),
        ({"non_retryable": [1]}, "non_retryable"),
        ({"params": [1, 2]}, "params"),
        ({"params": {1: "a"}}, "params"),
        ({"retry": "fixed"}, "retry"),
        ({"end_ms": 0}, "end_ms"),
        ({"end_ms": 20_000}, "end_ms"),
        ({"end_ms": "60000"}, "end_ms"),
        ({"end_ms": 253_402_300_800_000}, "end_ms"),
        ({"gc_grace_ms": 0}, "gc_grace_ms"),
        ({"bypass_retention_ms": -1}, "bypass_retention_ms"),
    ],
)
def test_invalid_config_is_rejected_naming_the_field(overrides: dict[str, Any], field: str) -> None:
    fields: dict[str, Any] = {"stream_id": "s", "start_ms": 0, **overrides}
    with pytest.raises(InvalidInput) as caught:
        StreamConfig(**fields)
    assert caught.value.field == field


def test_boundary_values_are_valid() -> None:
    config = StreamConfig("x" * 200, 0, window_ms=15_000, delay_ms=0, max_attempts=1)
    assert config.window_ms == config.step_ms


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        (lambda: Fixed(0), "retry.interval_ms"),
        (lambda: Fixed(True), "retry.interval_ms"),
        (lambda: Exponential(initial_ms=0), "retry.initial_ms"),
        (lambda: Exponential(initial_ms=2_000, max_ms=1_000), "retry.max_ms"),
        (lambda: Exponential(multiplier=0.5), "retry.multiplier"),
        (lambda: Exponential(multiplier=float("inf")), "retry.multiplier"),
        (lambda: Exponential(multiplier="2"), "retry.multiplier"),  # type: ignore[arg-type]
        (lambda: Exponential(jitter=1.5), "retry.jitter"),
        (lambda: Exponential(jitter=-0.1), "retry.jitter"),
    ],
)
def test_invalid_retry_policy_names_the_nested_field(retry: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        retry()
    assert caught.value.field == field


WIRE: dict[str, Any] = {
    "type": "upsert",
    "stream_id": "cluster-a",
    "start_ms": 1_795_946_407_000,
    "window_ms": 120_000,
    "step_ms": 30_000,
    "delay_ms": 5_000,
    "task_timeout_ms": 90_000,
    "bypass_after_ms": 600_000,
    "retry": {"strategy": "exponential", "initial_ms": 1000, "multiplier": 2, "max_ms": 60000},
    "max_attempts": 8,
    "non_retryable": ["bad_query", "auth"],
    "max_in_flight": 4,
    "params": {"query": "sum(up)", "labels": {"env": "prod"}},
}


def test_config_from_dict_reads_every_field_and_ignores_unknown_keys() -> None:
    config = config_from_dict(WIRE)
    assert config == StreamConfig(
        stream_id="cluster-a",
        start_ms=1_795_946_407_000,
        window_ms=120_000,
        step_ms=30_000,
        delay_ms=5_000,
        task_timeout_ms=90_000,
        bypass_after_ms=600_000,
        retry=Exponential(initial_ms=1000, multiplier=2.0, max_ms=60000, jitter=0.0),
        max_attempts=8,
        non_retryable=frozenset({"bad_query", "auth"}),
        max_in_flight=4,
        params={"query": "sum(up)", "labels": {"env": "prod"}},
    )


def test_config_from_dict_uses_defaults_for_absent_fields() -> None:
    assert config_from_dict({"stream_id": "s", "start_ms": 0}) == StreamConfig("s", 0)
    assert config_from_dict({"stream_id": "s", "start_ms": 0, "max_attempts": None}) == (
        StreamConfig("s", 0)
    )


@pytest.mark.parametrize(
    "retry",
    [
        Immediate(),
        Fixed(1),
        Fixed(60_000),
        Exponential(),
        Exponential(initial_ms=500, multiplier=1.5, max_ms=7_000, jitter=0.25),
    ],
)
def test_config_to_dict_is_the_json_compatible_inverse(retry: Any) -> None:
    config = StreamConfig("s", 12_345, retry=retry, non_retryable=frozenset({"b", "a"}))
    wire = config_to_dict(config)
    assert wire["non_retryable"] == ["a", "b"]
    assert config_from_dict(json.loads(json.dumps(wire))) == config
    assert config_to_dict(config_from_dict(WIRE)) == {
        k: v for k, v in WIRE.items() if k != "type"
    } | {
        "retry": {**WIRE["retry"], "multiplier": 2.0, "jitter": 0.0},
        "non_retryable": ["auth", "bad_query"],
        "end_ms": None,
        "gc_grace_ms": 48 * 3_600_000,
        "bypass_retention_ms": 30 * 86_400_000,
    }


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"stream_id": None}, "stream_id"),
        ({"start_ms": "0"}, "start_ms"),
        ({"window_ms": True}, "window_ms"),
        ({"step_ms": 15000.0}, "step_ms"),
        ({"max_in_flight": None}, "max_in_flight"),
        ({"non_retryable": "auth"}, "non_retryable"),
        ({"non_retryable": None}, "non_retryable"),
        ({"params": None}, "params"),
        ({"params": "x"}, "params"),
        ({"retry": None}, "retry"),
        ({"retry": {}}, "retry.strategy"),
        ({"retry": {"strategy": "linear"}}, "retry.strategy"),
        ({"retry": {"strategy": "fixed", "interval_ms": "60s"}}, "retry.interval_ms"),
        ({"retry": {"strategy": "fixed", "interval_ms": False}}, "retry.interval_ms"),
        ({"retry": {"strategy": "exponential", "multiplier": True}}, "retry.multiplier"),
        ({"retry": {"strategy": "exponential", "jitter": 2}}, "retry.jitter"),
    ],
)
def test_config_from_dict_rejects_wrong_types_naming_the_field(
    change: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        config_from_dict({"stream_id": "s", "start_ms": 0} | change)
    assert caught.value.field == field


@pytest.mark.parametrize("missing", ["stream_id", "start_ms"])
def test_config_from_dict_requires_stream_id_and_start_ms(missing: str) -> None:
    wire = {"stream_id": "s", "start_ms": 0}
    del wire[missing]
    with pytest.raises(InvalidInput) as caught:
        config_from_dict(wire)
    assert caught.value.field == missing


def test_config_from_dict_rejects_a_non_object() -> None:
    with pytest.raises(InvalidInput) as caught:
        config_from_dict([("stream_id", "s")])  # type: ignore[arg-type]
    assert caught.value.field == "config"


# -- bounds: every time the core computes from a config stays within what the codec reads ---------

DURATION_FIELDS = (
    "window_ms",
    "delay_ms",
    "task_timeout_ms",
    "bypass_after_ms",
    "gc_grace_ms",
    "bypass_retention_ms",
)


@pytest.mark.parametrize("name", DURATION_FIELDS)
def test_a_duration_may_be_ten_years_but_not_more(name: str) -> None:
    step = {"step_ms": 1_000} if name == "window_ms" else {}
    at_bound = StreamConfig("s", 0, **step, **{name: MAX_DURATION_MS})  # type: ignore[arg-type]
    assert getattr(at_bound, name) == MAX_DURATION_MS == 315_360_000_000
    with pytest.raises(InvalidInput) as caught:
        StreamConfig("s", 0, **step, **{name: MAX_DURATION_MS + 1_000})  # type: ignore[arg-type]
    assert caught.value.field == name
    assert f"<= {MAX_DURATION_MS}" in caught.value.reason


def test_step_ms_is_bounded_like_every_duration() -> None:
    with pytest.raises(InvalidInput) as caught:
        StreamConfig("s", 0, step_ms=2**53 - 1, window_ms=2**53 - 1)
    assert caught.value.field == "step_ms"


def test_start_ms_is_at_most_the_end_of_year_9999() -> None:
    assert StreamConfig("s", MAX_TIME_MS, step_ms=1).start_ms == 253_402_300_799_999
    with pytest.raises(InvalidInput) as caught:
        StreamConfig("s", MAX_TIME_MS + 1)
    assert caught.value.field == "start_ms"


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        (lambda ms: Fixed(ms), "retry.interval_ms"),
        (lambda ms: Exponential(initial_ms=ms, max_ms=ms), "retry.initial_ms"),
        (lambda ms: Exponential(initial_ms=1, max_ms=ms), "retry.max_ms"),
    ],
)
def test_a_retry_interval_may_be_ten_years_but_not_more(retry: Any, field: str) -> None:
    assert retry(MAX_DURATION_MS) is not None
    with pytest.raises(InvalidInput) as caught:
        retry(2**53 - 1)
    assert caught.value.field == field


def test_non_retryable_is_bounded_in_count_and_length() -> None:
    kinds = {f"kind-{i}" for i in range(MAX_NON_RETRYABLE)} | {"k" * MAX_ERROR_KIND_CHARS}
    with pytest.raises(InvalidInput) as caught:
        StreamConfig("s", 0, non_retryable=kinds)  # type: ignore[arg-type]
    assert caught.value.field == "non_retryable"
    assert "at most 100 kinds" in caught.value.reason
    with pytest.raises(InvalidInput) as caught:
        StreamConfig("s", 0, non_retryable=frozenset({"k" * (MAX_ERROR_KIND_CHARS + 1)}))
    assert caught.value.field == "non_retryable"
    assert "at most 200 characters" in caught.value.reason
    kept = StreamConfig("s", 0, non_retryable=frozenset(list(kinds)[:MAX_NON_RETRYABLE]))
    assert len(kept.non_retryable) == MAX_NON_RETRYABLE


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"x": 2**70}, "params.x"),
        ({"x": 2**53}, "params.x"),
        ({"a": [{"b": -(2**53)}]}, "params.a.0.b"),
        ({"x": float("nan")}, "params.x"),
        ({"x": [float("inf")]}, "params.x.0"),
        ({"x": b"bytes"}, "params.x"),
        ({"x": {1: "a"}}, "params.x"),
        ({"x": "\ud800"}, "params"),
        ({"x": "a" * MAX_PARAMS_BYTES}, "params"),
    ],
)
def test_check_params_refuses_what_a_task_or_the_state_cannot_carry(
    params: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_params(params)
    assert caught.value.field == field


def test_check_params_accepts_up_to_its_bounds() -> None:
    check_params({"max": 2**53 - 1, "min": -(2**53 - 1), "f": 1e300, "t": True, "n": None})
    deepest: Any = 1
    for _ in range(MAX_PARAMS_DEPTH - 1):
        deepest = [deepest]
    check_params({"x": deepest})
    with pytest.raises(InvalidInput) as caught:
        check_params({"x": [deepest]})
    assert caught.value.reason == f"must nest at most {MAX_PARAMS_DEPTH} levels deep"
    assert caught.value.field.startswith("params.x.0.0")
    filler = MAX_PARAMS_BYTES - len('{"x":""}')
    check_params({"x": "a" * filler})
    with pytest.raises(InvalidInput) as caught:
        check_params({"x": "é" * (filler // 2 + 1)})  # two bytes each in UTF-8
    assert caught.value.reason.startswith(f"must encode to at most {MAX_PARAMS_BYTES} bytes")


def test_end_ms_must_be_after_the_start_on_a_step_and_reads_back() -> None:
    config = StreamConfig("s", 0, end_ms=45_000, gc_grace_ms=1, bypass_retention_ms=2)
    assert config_from_dict(config_to_dict(config)) == config
    with pytest.raises(InvalidInput) as caught:
        StreamConfig("s", 30_000, end_ms=30_000)
    assert (caught.value.field, caught.value.reason) == ("end_ms", "must be after start_ms (30000)")
    with pytest.raises(InvalidInput, match=r"must be a multiple of step_ms \(15000\)"):
        StreamConfig("s", 0, end_ms=50_000)
