"""A stream's config on the wire and in the core: the same fields, defaults and bounds.

The wire's models read the defaults and bounds from the core (streams.wire.config), so they agree
by construction; what can still drift is a field added to one side only, or a literal written
back into the wire. These tests catch both, at every bound.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from streams.core import Upsert
from streams.core.config import (
    CONFIG_BOUNDS,
    DEFAULT_PIPELINE,
    MAX_PIPELINE_CHARS,
    PIPELINE_PATTERN,
    StreamConfig,
    config_defaults,
)
from streams.core.retry import RETRY_BOUNDS, Fixed
from streams.errors import InvalidInput
from streams.wire import ConfigModel, decode_control, encode_control, json_schema

BASE: dict[str, Any] = {"stream_id": "s", "start_ms": 0, "window_ms": 1, "step_ms": 1}


def upsert(fields: dict[str, Any]) -> bytes:
    return json.dumps({"type": "upsert", **fields}).encode()


def test_the_wire_and_the_core_have_the_same_config_fields() -> None:
    core = {f.name for f in dataclasses.fields(StreamConfig)}
    assert set(ConfigModel.model_fields) == core


def test_every_integer_field_of_the_core_is_bounded_in_one_table() -> None:
    ints = {
        f.name
        for f in dataclasses.fields(StreamConfig)
        if f.type in ("int", "int | None") and f.name != "stream_id"
    }
    assert set(CONFIG_BOUNDS) == ints


def test_the_wire_defaults_are_the_cores() -> None:
    wire = ConfigModel(stream_id="s", start_ms=0).model_dump()
    assert {k: v for k, v in wire.items() if k not in ("stream_id", "start_ms")} == (
        config_defaults()
    )
    decoded = decode_control(upsert({"stream_id": "s", "start_ms": 0}))
    assert decoded == Upsert(StreamConfig("s", 0))


@pytest.mark.parametrize("name", sorted(CONFIG_BOUNDS))
def test_the_wire_and_the_core_accept_a_field_at_its_bounds(name: str) -> None:
    bound = CONFIG_BOUNDS[name]
    assert bound.le is not None
    lowest = bound.ge if bound.gt is None else bound.gt + 1
    assert lowest is not None
    for value in (lowest, bound.le):
        fields = {**BASE, name: value}
        if name == "step_ms":
            fields["window_ms"] = value
        if name == "end_ms" and value <= fields["start_ms"]:
            continue  # an end at 0 is refused by the rule end_ms > start_ms, not by its bound
        assert decode_control(upsert(fields)) == Upsert(StreamConfig(**fields)), (name, value)


@pytest.mark.parametrize("name", sorted(CONFIG_BOUNDS))
def test_the_wire_and_the_core_refuse_a_field_past_its_bounds(name: str) -> None:
    bound = CONFIG_BOUNDS[name]
    assert bound.le is not None
    lowest = bound.ge if bound.gt is None else bound.gt + 1
    assert lowest is not None
    for value in (lowest - 1, bound.le + 1):
        fields = {**BASE, name: value}
        with pytest.raises(InvalidInput) as wire:
            decode_control(upsert(fields))
        with pytest.raises(InvalidInput) as core:
            StreamConfig(**fields)
        assert wire.value.field == core.value.field == name, value


@pytest.mark.parametrize("name", sorted(CONFIG_BOUNDS))
def test_the_published_schema_states_the_cores_bounds(name: str) -> None:
    bound = CONFIG_BOUNDS[name]
    field = json_schema("control")["$defs"]["UpsertControl"]["properties"][name]
    stated = next((option for option in field.get("anyOf", []) if "maximum" in option), field)
    assert stated["maximum"] == bound.le
    assert stated.get("minimum") == bound.ge
    assert stated.get("exclusiveMinimum") == bound.gt


def test_a_retry_interval_past_its_bound_is_refused_by_both() -> None:
    too_long = RETRY_BOUNDS["interval_ms"].le
    assert too_long is not None
    retry = {"strategy": "fixed", "interval_ms": too_long + 1}
    with pytest.raises(InvalidInput) as wire:
        decode_control(upsert({**BASE, "retry": retry}))
    with pytest.raises(InvalidInput) as core:
        Fixed(too_long + 1)
    assert wire.value.field == core.value.field == "retry.interval_ms"
    assert decode_control(upsert({**BASE, "retry": {**retry, "interval_ms": too_long}}))


@pytest.mark.parametrize("pipeline", ["", "a.b", "-a", "é", "x" * (MAX_PIPELINE_CHARS + 1), 7])
def test_the_wire_and_the_core_refuse_a_bad_pipeline_naming_it(pipeline: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_control(upsert({**BASE, "pipeline": pipeline}))
    assert caught.value.field == "pipeline"
    with pytest.raises(InvalidInput) as caught:
        StreamConfig("s", 0, pipeline=pipeline)
    assert caught.value.field == "pipeline"


def test_the_published_schema_states_the_cores_pipeline_rule() -> None:
    field = json_schema("control")["$defs"]["UpsertControl"]["properties"]["pipeline"]
    assert (field["pattern"], field["maxLength"], field["default"]) == (
        PIPELINE_PATTERN, MAX_PIPELINE_CHARS, DEFAULT_PIPELINE
    )  # fmt: skip
    decoded = decode_control(upsert({**BASE, "pipeline": "logs"}))
    assert isinstance(decoded, Upsert) and decoded.config.pipeline == "logs"
    assert decode_control(encode_control(decoded)) == decoded
