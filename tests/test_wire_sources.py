"""A source's limits on the wire: `source_set`/`source_delete` on `control`, their key, and the
compacted `sources` view; every rejection names its field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streams.core.admission import SourceDelete, SourceLimits, SourceSet
from streams.errors import InvalidInput
from streams.kafka.partitioner import partition_of
from streams.topics import Topics
from streams.wire import (
    decode_control,
    decode_source_entry,
    decode_source_view,
    encode_control,
    encode_source_view,
    json_schema,
    source_control_key,
    source_view_key,
    stream_key,
)

T0 = 1_795_946_400_000


def raw(**fields: Any) -> bytes:
    return json.dumps({"type": "source_set", "source": "thanos-eu-1", **fields}).encode()


def test_a_source_set_decodes_to_its_limits_and_round_trips() -> None:
    control = decode_control(raw(max_in_flight=20, rate_per_s=5, backfill_share=0.3))
    assert control == SourceSet(
        SourceLimits("thanos-eu-1", max_in_flight=20, rate_per_s=5.0, backfill_share=0.3)
    )
    assert isinstance(control, SourceSet) and control.limits.burst == 5  # resolved
    assert decode_control(encode_control(control)) == control
    assert json.loads(encode_control(control)) == {
        "type": "source_set", "source": "thanos-eu-1", "max_in_flight": 20, "rate_per_s": 5.0,
        "burst": 5, "backfill_share": 0.3, "pace_start": 4,
    }  # fmt: skip


def test_a_source_set_with_only_its_name_is_unlimited() -> None:
    control = decode_control(raw())
    assert control == SourceSet(SourceLimits.unlimited("thanos-eu-1"))


def test_a_source_delete_decodes_and_round_trips() -> None:
    control = decode_control(b'{"type": "source_delete", "source": "thanos-eu-1"}')
    assert control == SourceDelete("thanos-eu-1")
    assert decode_control(encode_control(control)) == control


BAD_SETS = [
    ("no source", {"source": None}, "source"),
    ("empty source", {"source": ""}, "source"),
    ("long source", {"source": "x" * 201}, "source"),
    ("max_in_flight 0", {"max_in_flight": 0}, "max_in_flight"),
    ("max_in_flight too big", {"max_in_flight": 1_000_001}, "max_in_flight"),
    ("max_in_flight a float", {"max_in_flight": 2.5}, "max_in_flight"),
    ("max_in_flight a string", {"max_in_flight": "20"}, "max_in_flight"),
    ("rate 0", {"rate_per_s": 0}, "rate_per_s"),
    ("rate negative", {"rate_per_s": -1.5}, "rate_per_s"),
    ("rate too big", {"rate_per_s": 1e7}, "rate_per_s"),
    ("rate a bool", {"rate_per_s": True}, "rate_per_s"),
    ("burst without a rate", {"burst": 3}, "burst"),
    ("burst 0", {"rate_per_s": 2, "burst": 0}, "burst"),
    ("share 1", {"backfill_share": 1}, "backfill_share"),
    ("share negative", {"backfill_share": -0.1}, "backfill_share"),
    ("share null", {"backfill_share": None}, "backfill_share"),
    ("pace_start 0", {"pace_start": 0}, "pace_start"),
]


@pytest.mark.parametrize(
    ("fields", "field"), [c[1:] for c in BAD_SETS], ids=[c[0] for c in BAD_SETS]
)
def test_a_bad_source_set_is_rejected_naming_the_field(fields: dict[str, Any], field: str) -> None:
    value = {"type": "source_set", "source": "s", **fields}
    if value["source"] is None:
        del value["source"]
    with pytest.raises(InvalidInput) as caught:
        decode_control(json.dumps(value).encode())
    assert caught.value.field == field


def test_a_non_finite_rate_is_rejected_naming_the_field() -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_control(b'{"type": "source_set", "source": "s", "rate_per_s": Infinity}')
    assert (caught.value.field, caught.value.reason) == ("rate_per_s", "must be finite")


@pytest.mark.parametrize("source", ["", "x" * 201, 3])
def test_a_bad_source_delete_is_rejected_naming_the_field(source: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_control(json.dumps({"type": "source_delete", "source": source}).encode())
    assert caught.value.field == "source"


def test_an_unknown_type_names_the_new_ones() -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_control(b'{"type": "source_put", "source": "s"}')
    assert caught.value.field == "type"
    assert "source_set, source_delete" in caught.value.reason


@pytest.mark.parametrize("name", ["thanos", "source:thanos", "\xffsource:thanos", "é" * 200])
def test_a_sources_control_key_is_never_a_streams(name: str) -> None:
    """0xFF never occurs in UTF-8, so no stream id encodes to a source's key."""
    key = source_control_key(name)
    assert key.startswith(b"\xffsource:")
    with pytest.raises(UnicodeDecodeError):
        key.decode()
    assert key != stream_key(name) and key != stream_key("source:" + name)
    assert 0 <= partition_of(key, 6) < 6  # placed by murmur2 like any key of `control`


# -- the `sources` view ----------------------------------------------------------------------


def test_the_view_round_trips_with_when_it_was_updated() -> None:
    limits = SourceLimits("thanos-eu-1", max_in_flight=20, rate_per_s=2.5, pace_start=8)
    value = encode_source_view(limits, T0)
    assert json.loads(value) == {
        "source": "thanos-eu-1", "max_in_flight": 20, "rate_per_s": 2.5, "burst": 3,
        "backfill_share": 0.2, "pace_start": 8, "updated_ms": T0,
    }  # fmt: skip
    key = source_view_key("thanos-eu-1")
    assert key == b"thanos-eu-1"
    assert decode_source_view(key, value) == limits
    entry = decode_source_entry(key, value)
    assert entry is not None and entry == (limits, T0)


def test_a_tombstone_decodes_to_none() -> None:
    assert decode_source_view(b"thanos-eu-1", None) is None
    assert decode_source_entry(b"thanos-eu-1", None) is None


BAD_VIEWS = [
    ("a key of another source", b"other", {}, "key"),
    ("no key", None, {}, "key"),
    ("no updated_ms", b"s", {"updated_ms": None}, "updated_ms"),
    ("negative updated_ms", b"s", {"updated_ms": -1}, "updated_ms"),
    ("a bound broken", b"s", {"max_in_flight": 0}, "max_in_flight"),
    ("burst without rate", b"s", {"burst": 2}, "burst"),
    ("share too big", b"s", {"backfill_share": 1.5}, "backfill_share"),
]


@pytest.mark.parametrize(
    ("key", "fields", "field"), [c[1:] for c in BAD_VIEWS], ids=[c[0] for c in BAD_VIEWS]
)
def test_a_bad_view_is_rejected_naming_the_field(
    key: bytes | None, fields: dict[str, Any], field: str
) -> None:
    value = json.loads(encode_source_view(SourceLimits("s"), T0))
    value.update(fields)
    if value["updated_ms"] is None:
        del value["updated_ms"]
    with pytest.raises(InvalidInput) as caught:
        decode_source_view(key, json.dumps(value).encode())
    assert caught.value.field == field


def test_not_json_is_rejected_naming_the_value() -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_source_view(b"s", b"{not json")
    assert caught.value.field == "value"


def test_the_topic_is_named_and_its_schema_says_its_fields() -> None:
    assert Topics("tm").sources == "tm.sources"
    schema = json_schema("sources")
    assert set(schema["properties"]) == {
        "source", "max_in_flight", "rate_per_s", "burst", "backfill_share", "pace_start",
        "updated_ms",
    }  # fmt: skip
    assert set(schema["required"]) == {"source", "updated_ms"}
    control = json.dumps(json_schema("control"))
    assert "source_set" in control and "source_delete" in control
