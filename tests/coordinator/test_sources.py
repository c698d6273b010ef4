"""A source's controls in the coordinator: a `source_set` publishes its limits on `sources`, a
`source_delete` a tombstone, a bad one is rejected naming the field; in both engines' delivery."""

from __future__ import annotations

from typing import Any

import pytest

from streams.core.admission import SourceLimits
from streams.kafka.partitioner import partition_of
from streams.wire import decode_source_entry, source_control_key

from .fakes import PARTITIONS, T0, Driver, at

BOTH_ENGINES = pytest.mark.parametrize("transactional", [False, True], ids=["faust", "confluent"])
SOURCE = "thanos-eu-1"


def source_set(**fields: Any) -> dict[str, Any]:
    return {"type": "source_set", "source": SOURCE, **fields}


def control(d: Driver, value: dict[str, Any], now_ms: int, **kw: Any) -> None:
    """Send a source's control keyed (and so placed) as the CLI does."""
    d.control(value, now_ms, key=kw.pop("key", source_control_key(value["source"])), **kw)


def on_sources(d: Driver) -> list[tuple[bytes, bytes | None]]:
    return [(s.key, s.value) for s in d.emitter.on(d.topics.sources)]


@BOTH_ENGINES
def test_a_set_publishes_the_sources_limits_on_the_view(transactional: bool) -> None:
    d = Driver(transactional=transactional)
    control(d, source_set(max_in_flight=20, rate_per_s=5), at(10, 5))

    ((key, value),) = on_sources(d)
    assert key == SOURCE.encode()
    entry = decode_source_entry(key, value)
    assert entry == (SourceLimits(SOURCE, max_in_flight=20, rate_per_s=5.0), at(10, 5))
    assert d.rejected() == [] and d.store.snapshot() == {}  # no stream's state is touched
    assert d.processor.stats["source_sets"] == 1


@BOTH_ENGINES
def test_a_set_again_replaces_the_entry(transactional: bool) -> None:
    d = Driver(transactional=transactional)
    control(d, source_set(max_in_flight=20), at(10, 5))
    control(d, source_set(rate_per_s=2), at(10, 6))

    entries = [decode_source_entry(k, v) for k, v in on_sources(d)]
    assert [e.limits if e else None for e in entries] == [
        SourceLimits(SOURCE, max_in_flight=20),
        SourceLimits(SOURCE, rate_per_s=2.0),  # every field: max_in_flight is back to none
    ]


@BOTH_ENGINES
@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"max_in_flight": 0}, "max_in_flight: must be >= 1, got 0"),
        ({"burst": 3}, "burst: is only allowed with rate_per_s (a bucket's size)"),
        ({"backfill_share": 1}, "backfill_share: must be below 1 (live windows keep the rest)"),
        ({"pace_start": "4"}, "pace_start: Input should be a valid integer"),
    ],
)
def test_a_bad_set_is_rejected_naming_the_field(
    transactional: bool, fields: dict[str, Any], reason: str
) -> None:
    d = Driver(transactional=transactional)
    control(d, source_set(**fields), at(10, 5))

    (rejected,) = d.rejected()
    assert rejected["reason"] == reason
    assert rejected["source_topic"] == d.topics.control
    assert on_sources(d) == []


@BOTH_ENGINES
def test_a_delete_sends_a_tombstone_even_for_an_unknown_source(transactional: bool) -> None:
    d = Driver(transactional=transactional)
    control(d, source_set(max_in_flight=20), at(10, 5))
    control(d, {"type": "source_delete", "source": SOURCE}, at(10, 6))
    control(d, {"type": "source_delete", "source": "never-set"}, at(10, 7))  # idempotent

    assert on_sources(d)[1:] == [(SOURCE.encode(), None), (b"never-set", None)]
    assert d.rejected() == []
    assert d.processor.stats["source_deletes"] == 2


def test_a_key_that_is_not_the_sources_is_rejected_naming_the_key() -> None:
    d = Driver()
    control(d, source_set(), at(10, 5), key=SOURCE.encode())  # a stream's key, not a source's

    (rejected,) = d.rejected()
    assert rejected["reason"] == (f"key: must be 0xFF + 'source:' + the source {SOURCE!r} as UTF-8")
    assert on_sources(d) == []


def test_a_key_in_another_partition_is_rejected_naming_the_partition() -> None:
    d = Driver()
    key = source_control_key(SOURCE)
    owner = partition_of(key, PARTITIONS)
    control(d, source_set(), at(10, 5), partition=(owner + 1) % PARTITIONS)

    (rejected,) = d.rejected()
    assert rejected["reason"].startswith(
        f"partition: key of source {SOURCE!r} belongs to partition {owner} of {PARTITIONS}, "
    )
    assert on_sources(d) == []


def test_a_stream_named_like_a_sources_key_is_still_a_stream() -> None:
    """A stream id "source:x" keys its controls b"source:x", which is not source x's key."""
    d = Driver()
    sid = f"source:{SOURCE}"
    d.assign(sid)
    d.upsert(sid, at(10, 5))
    control(d, source_set(max_in_flight=3), at(10, 5))

    assert d.rejected() == []
    assert [(t["stream_id"], t["start_ms"]) for t in d.tasks()] == [(sid, T0)]
    assert [k for k, _ in on_sources(d)] == [SOURCE.encode()]
