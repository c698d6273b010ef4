"""The params check's own cases: the field named, the reason worded, and a schema it cannot
use never refusing anything (the worker's decode stays the last word)."""

from __future__ import annotations

from typing import Any

import pytest

from streams.errors import InvalidInput
from streams.params_schema import check_params, first_error

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "window": {"type": "integer", "minimum": 1},
        "mode": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}, "maxItems": 2},
    },
    "required": ["window"],
    "additionalProperties": False,
    "$defs": {"Tag": {"type": "string", "pattern": "^[a-z]+$"}},
}


@pytest.mark.parametrize(
    ("params", "field", "reason"),
    [
        ({}, "params.window", "is required"),
        ({"window": 1, "extra": 1}, "params.extra", "is not a param of this pipeline"),
        ({"window": "1"}, "params.window", "must be an integer, got '1'"),
        ({"window": True}, "params.window", "must be an integer, got True"),
        ({"window": 0}, "params.window", "must be at least 1"),
        ({"window": 1, "mode": 5}, "params.mode", "must be a string or null, got 5"),
        ({"window": 1, "tags": ["ok", "B"]}, "params.tags[1]", "must match '^[a-z]+$'"),
        ({"window": 1, "tags": ["a", "b", "c"]}, "params.tags", "must have at most 2 item(s)"),
    ],
)
def test_a_refusal_names_the_field_and_says_why(
    params: dict[str, Any], field: str, reason: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_params(SCHEMA, params)
    assert (refused.value.field, refused.value.reason) == (field, reason)


def test_good_params_pass() -> None:
    check_params(SCHEMA, {"window": 3, "mode": None, "tags": ["a"]})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"x": {"$ref": "https://elsewhere.invalid/x.json"}}},
        {"type": 12},  # not a JSON Schema
    ],
)
def test_a_schema_it_cannot_use_refuses_nothing(schema: dict[str, Any]) -> None:
    assert first_error(schema, {"x": 1}) is None


def test_a_missing_param_is_said_before_an_unknown_one() -> None:
    # `windw` for `window`: the param the pipeline needs is the one named.
    assert first_error(SCHEMA, {"windw": 1}) == ("params.window", "is required")
