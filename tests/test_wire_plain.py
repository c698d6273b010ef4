"""`decode_result`'s plain path (orjson and type checks) agrees with the pydantic models.

Whatever a `results` value holds, the plain path either leaves it to the models (None) or builds
exactly the Result they build; it never accepts what they refuse.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core import Result
from streams.core._checks import MAX_ERROR_KIND_CHARS, MAX_ERROR_MESSAGE_CHARS, MAX_MS
from streams.errors import InvalidInput
from streams.wire import (
    MAX_STREAM_ID_CHARS,
    _plain_result,
    _validated_result,
    decode_result,
)

_MISSING = object()

# Values at and around every bound the models check, and values of every other JSON type.
_INTS = st.sampled_from([-1, 0, 1, 2, 3, 59_999, 60_000, MAX_MS, MAX_MS + 1, 2**63, 2**64 + 1])
_ODD = st.sampled_from([None, True, False, 1.0, 1.5, "1", "", [], {}, [1], {"a": 1}])
_STRINGS = st.sampled_from(
    ["a", "", "s-1", "é", "x" * MAX_STREAM_ID_CHARS, "x" * (MAX_STREAM_ID_CHARS + 1)]
)
_ANY = st.one_of(_INTS, _ODD, _STRINGS, st.just(_MISSING))
_PIPELINES = st.sampled_from(
    ["logs", "default", "a-b_9", "", "a.b", "-a", "é", "a\n", "x" * 64, "x" * 65]
)
_ERRORS = st.one_of(
    _ODD,
    st.fixed_dictionaries(
        {},
        optional={
            "kind": st.one_of(
                st.sampled_from(["no_data", "", "k" * (MAX_ERROR_KIND_CHARS + 5)]), _ODD
            ),
            "message": st.one_of(
                st.sampled_from(["", "m", "m" * (MAX_ERROR_MESSAGE_CHARS + 5)]), _ODD
            ),
            "extra": _INTS,
        },
    ),
)


def _base(outcome: str) -> dict[str, Any]:
    value: dict[str, Any] = {
        "stream_id": "s-1",
        "start_ms": 0,
        "end_ms": 60_000,
        "attempt": 1,
        "outcome": outcome,
    }
    if outcome == "ack":
        value["ack_ms"] = 60_000
    if outcome == "nack":
        value["error"] = {"kind": "no_data", "message": "not yet"}
    return value


@st.composite
def _values(draw: st.DrawFn) -> dict[str, Any]:
    value = _base(draw(st.sampled_from(["ack", "nack", "heartbeat"])))
    fields = ["stream_id", "start_ms", "end_ms", "attempt", "outcome", "ack_ms", "incarnation"]
    fields.append("pipeline")
    for name in draw(st.lists(st.sampled_from(fields), max_size=3, unique=True)):
        if name == "outcome":
            new: Any = draw(st.one_of(st.sampled_from(["ack", "nack", "heartbeat", "ACK"]), _ANY))
        elif name == "stream_id":
            new = draw(st.one_of(_STRINGS, _ANY))
        elif name == "pipeline":
            new = draw(st.one_of(_PIPELINES, _ANY))
        else:
            new = draw(_ANY)
        if new is _MISSING:
            value.pop(name, None)
        else:
            value[name] = new
    if draw(st.booleans()):
        value["error"] = draw(_ERRORS)
    if draw(st.booleans()):
        value["extra"] = draw(st.one_of(_INTS, _ODD))
    return value


def _models(raw: bytes | None) -> Result | str:
    try:
        return _validated_result(raw)
    except InvalidInput as exc:
        return f"invalid: {exc}"


@settings(max_examples=3000, deadline=None)
@given(_values())
def test_the_plain_path_builds_what_the_models_build_or_leaves_the_value(
    value: dict[str, Any],
) -> None:
    raw = json.dumps(value).encode()  # json: integers past 64 bits too
    plain = _plain_result(raw)
    expected = _models(raw)
    if plain is not None:
        assert plain == expected
    assert (plain if plain is not None else _models(raw)) == expected
    try:
        assert decode_result(raw) == expected
    except InvalidInput as exc:
        assert expected == f"invalid: {exc}"


@pytest.mark.parametrize(
    "raw",
    [
        None,
        b"",
        b"[]",
        b"null",
        b'"x"',
        b"{",
        b'{"stream_id":"s","start_ms":0,"end_ms":1,"attempt":1,"outcome":"heartbeat","x":NaN}',
        b'{"stream_id":"s","start_ms":0,"end_ms":1,"attempt":1,"outcome":"ack","ack_ms":1,'
        b'"outcome":"nack"}',
        b'{"stream_id":"s","start_ms":0,"end_ms":1,"attempt":1,"outcome":"nack","ack_ms":1,'
        b'"outcome":"ack"}',
        b'{"stream_id":"\\ud800","start_ms":0,"end_ms":1,"attempt":1,"outcome":"heartbeat"}',
        b'{"stream_id":"s","start_ms":0,"end_ms":1,"attempt":1e0,"outcome":"heartbeat"}',
        b' {"stream_id":"s","start_ms":0,"end_ms":1,"attempt":1,"outcome":"heartbeat"}\n',
        b'{"stream_id":"s","start_ms":0,"end_ms":1,"attempt":1,"outcome":"heartbeat"} x',
    ],
)
def test_unusual_json_decodes_as_the_models_decode_it(raw: bytes | None) -> None:
    plain = _plain_result(raw)
    expected = _models(raw)
    if plain is not None:
        assert plain == expected
    try:
        assert decode_result(raw) == expected
    except InvalidInput as exc:
        assert expected == f"invalid: {exc}"
