"""The outage guard on the wire: a stream's `source` in upserts, `held_ms` in commits."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streams.core import Commit, CommittedWindow, StreamConfig, Upsert
from streams.errors import InvalidInput
from streams.wire import (
    CommitMessage,
    decode_commit,
    decode_control,
    encode_commit,
    encode_control,
    json_schema,
)

UPSERT = {"type": "upsert", "stream_id": "cluster-1", "start_ms": 1_795_946_400_000}


def _upsert(**extra: Any) -> bytes:
    return json.dumps({**UPSERT, **extra}).encode()


def test_an_upsert_carries_the_streams_source() -> None:
    control = decode_control(_upsert(source="http://thanos-query:9090"))
    assert isinstance(control, Upsert)
    assert control.config.source == "http://thanos-query:9090"
    assert decode_control(encode_control(control)) == control


def test_an_upsert_without_a_source_shares_none_and_encodes_without_one() -> None:
    control = decode_control(_upsert())
    assert isinstance(control, Upsert) and control.config.source is None
    assert "source" not in json.loads(encode_control(control))


@pytest.mark.parametrize("bad", ["", "x" * 201, 12, ["a"]])
def test_a_bad_source_is_rejected_naming_the_field(bad: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_control(_upsert(source=bad))
    assert caught.value.field == "source"


def test_a_commit_after_a_hold_carries_held_ms_and_round_trips() -> None:
    commit = Commit(
        "cluster-1",
        2_000,
        1_000,
        9_000,
        (CommittedWindow(1_000, 1_500, "ack", 4, 120_000), CommittedWindow(1_500, 2_000, "ack", 1)),
    )
    wire = json.loads(encode_commit(commit))
    assert wire["windows"][0]["held_ms"] == 120_000
    assert "held_ms" not in wire["windows"][1]
    assert decode_commit(encode_commit(commit)) == commit
    assert CommitMessage.model_validate(wire).model_dump(exclude_unset=True) == wire


def test_a_negative_held_ms_is_rejected_naming_the_field() -> None:
    wire = {
        "stream_id": "cluster-1",
        "downstream_ms": 2,
        "previous_ms": 1,
        "committed_ms": 3,
        "windows": [{"start_ms": 1, "end_ms": 2, "reason": "ack", "attempts": 1, "held_ms": -5}],
    }
    with pytest.raises(InvalidInput) as caught:
        decode_commit(json.dumps(wire).encode())
    assert "held_ms" in caught.value.field


def test_the_schemas_document_source_and_held_ms() -> None:
    assert "source" in json_schema("control")["$defs"]["UpsertControl"]["properties"]
    window = json_schema("commits")["$defs"]["CommittedWindowModel"]["properties"]
    assert "held_ms" in window


def test_a_config_with_a_source_equals_its_decoded_upsert() -> None:
    config = StreamConfig("cluster-1", 1_795_946_400_000, source="s")
    assert decode_control(encode_control(Upsert(config))) == Upsert(config)
