"""`/api/streams`'s parameters and document, as pure functions of a query string and a table."""

from __future__ import annotations

import pytest

from streams.dashboard.api import MAX_LIMIT, BadParameter, StreamsQuery, streams_response
from streams.dashboard.state import Snapshot
from tests.dashboard.fakes import FakeStream

NOW = 1_800_000_000_000


def test_the_defaults_are_the_first_page_by_largest_lag() -> None:
    assert StreamsQuery.parse("") == StreamsQuery(0, 50, "lag_ms", True, "")
    assert StreamsQuery.parse("sort=stream_id").descending is False  # ids read A to Z
    assert StreamsQuery.parse("sort=attempt").descending is True
    query = StreamsQuery.parse("offset=100&limit=500&sort=state&order=asc&q=eu+west%2F1")
    assert query == StreamsQuery(100, MAX_LIMIT, "state", False, "eu west/1")
    assert StreamsQuery.parse("q=").q == ""


@pytest.mark.parametrize(
    ("query", "parameter", "reason"),
    [
        ("limit=0", "limit", "must be an integer from 1 to 500"),
        ("limit=501", "limit", "must be an integer from 1 to 500"),
        ("limit=ten", "limit", "must be an integer from 1 to 500"),
        ("limit=", "limit", "must be an integer from 1 to 500"),
        ("limit=-1", "limit", "must be an integer from 1 to 500"),
        ("limit=%D9%A3", "limit", "must be an integer from 1 to 500"),  # an Arabic-Indic 3
        ("offset=-5", "offset", "must be an integer from 0 to 1,000,000,000"),
        ("offset=" + "9" * 40, "offset", "must be an integer from 0 to 1,000,000,000"),
        (
            "sort=config",
            "sort",
            "must be one of stream_id, downstream_ms, lag_ms, state, "
            "window, attempt, bypasses, last_error",
        ),
        ("order=up", "order", "must be asc or desc"),
        ("q=" + "x" * 201, "q", "must be at most 200 characters"),
        ("limit=5&limit=6", "limit", "is given more than once"),
        ("page=2", "page", "is not a parameter (those are offset, limit, sort, order, q)"),
        ("limit", "query", "is not a valid query string (bad query field: 'limit')"),
    ],
)
def test_a_bad_parameter_is_named_with_the_reason(query: str, parameter: str, reason: str) -> None:
    with pytest.raises(BadParameter) as refused:
        StreamsQuery.parse(query)
    assert (refused.value.parameter, refused.value.reason) == (parameter, reason)
    status, doc = streams_response(Snapshot(), query, NOW)
    assert status == 400
    assert doc == {
        "error": f"bad parameter {parameter}: {reason}",
        "parameter": parameter,
        "reason": reason,
    }


def test_the_document_holds_one_page_and_counts_every_stream() -> None:
    views = [FakeStream(f"s{i:03d}", downstream_ms=NOW - i * 1000) for i in range(120)]
    views[7].state_name = "paused"
    snapshot = Snapshot.of(views, [], NOW - 500)
    status, doc = streams_response(snapshot, "offset=10&limit=3&q=s0", NOW)
    assert status == 200
    assert {k: v for k, v in doc.items() if k != "streams"} == {
        "now_ms": NOW,
        "refreshed_ms": NOW - 500,
        "caught_up": True,
        "total": 120,
        "matching": 100,
        "offset": 10,
        "limit": 3,
        "sort": "lag_ms",
        "order": "desc",
        "q": "s0",
        "counts": {"live": 119, "catching up": 0, "retrying": 0, "paused": 1, "finished": 0},
    }
    assert [(s["stream_id"], s["lag_ms"]) for s in doc["streams"]] == [
        ("s089", 89_000),
        ("s088", 88_000),
        ("s087", 87_000),
    ]
    _, past_the_end = streams_response(snapshot, "offset=1000", NOW)
    assert past_the_end["streams"] == []
    assert past_the_end["matching"] == 120
