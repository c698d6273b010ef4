"""The window timeline as a pure function: committed windows, listed bypasses and the view in,
cells out (streams.dashboard.timeline); and its endpoint's answers over a snapshot."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest

from streams.core import CommittedWindow
from streams.dashboard.timeline import (
    MAX_CELLS,
    Recent,
    answer,
    cells,
    stream_id_of,
    timeline_document,
)
from tests.dashboard.fakes import FakeBypass, FakeStream

T0 = 1_795_946_400_000  # 2026-11-29T10:00:00Z
MIN = 60_000
CONFIG: dict[str, object] = {"window_ms": MIN, "end_ms": None}
ERROR = {"kind": "no_data", "message": "<b>source</b> down"}


def stream(**fields: Any) -> FakeStream:
    defaults: dict[str, Any] = {"downstream_ms": T0 + 3 * MIN, "config": dict(CONFIG)}
    return FakeStream("s", **{**defaults, **fields})


def w(start_min: int, end_min: float, reason: str = "ack", attempts: int = 1, **kw: Any) -> Any:
    window = CommittedWindow(T0 + start_min * MIN, T0 + int(end_min * MIN), reason, attempts, **kw)  # type: ignore[arg-type]
    return window, window.end_ms + 150  # committed 150 ms after its end


def shown(found: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [((c["start_ms"] - T0) // MIN, c["outcome"]) for c in found]


def test_committed_windows_then_the_open_current_one() -> None:
    view = stream(window=(T0 + 3 * MIN, T0 + 4 * MIN), attempt=1)
    found = cells(view, [w(0, 1), w(1, 2, attempts=2), w(2, 3)], [])
    assert shown(found) == [(0, "acked"), (1, "acked"), (2, "acked"), (3, "open")]
    assert found[1] == {
        "start_ms": T0 + MIN,
        "end_ms": T0 + 2 * MIN,
        "outcome": "acked",
        "attempts": 2,
        "committed_ms": T0 + 2 * MIN + 150,
        "held_ms": None,
        "held_since_ms": None,
        "first_failed_ms": None,
        "bypassed_ms": None,
        "last_error": None,
        "current": False,
        "gap_before": False,
    }
    assert found[3]["current"] and found[3]["attempts"] == 1
    assert not any(c["gap_before"] for c in found)


def test_an_ack_short_of_its_window_is_partial_but_a_bounded_streams_cut_end_is_not() -> None:
    found = cells(stream(), [w(0, 1), w(1, 1.5), w(1.5, 2.5)], [])
    assert [c["outcome"] for c in found] == ["acked", "partial", "acked"]
    bounded = stream(config={"window_ms": MIN, "end_ms": T0 + int(2.5 * MIN)})
    found = cells(bounded, [w(0, 1), w(1, 2), w(2, 2.5)], [])
    assert [c["outcome"] for c in found] == ["acked", "acked", "acked"]


def test_a_bypass_takes_its_failures_and_error_from_the_listing() -> None:
    listed = FakeBypass(
        "s", T0 + MIN, T0 + 2 * MIN, attempts=7, first_failed_ms=T0 + 2 * MIN,
        bypassed_ms=T0 + 7 * MIN, last_error=ERROR,
    )  # fmt: skip
    found = cells(stream(), [w(0, 1), w(1, 2, "bypass", attempts=8), w(2, 3)], [listed])
    assert shown(found) == [(0, "acked"), (1, "bypassed"), (2, "acked")]
    bypass = found[1]
    assert bypass["attempts"] == 7  # failures, as `bypassed` counts them
    assert bypass["committed_ms"] == T0 + 2 * MIN + 150
    assert (bypass["first_failed_ms"], bypass["bypassed_ms"]) == (T0 + 2 * MIN, T0 + 7 * MIN)
    assert bypass["last_error"] == ERROR  # text stays data: the page puts it in as text


def test_a_listed_bypass_older_than_the_tail_shows_before_a_gap() -> None:
    old = FakeBypass("s", T0 - 30 * MIN, T0 - 29 * MIN, last_error=ERROR)
    other = FakeBypass("other", T0 - 20 * MIN, T0 - 19 * MIN)
    found = cells(stream(), [w(0, 1), w(1, 2)], [old, other])
    assert shown(found) == [(-30, "bypassed"), (0, "acked"), (1, "acked")]
    assert [c["gap_before"] for c in found] == [False, True, False]
    assert found[0]["committed_ms"] is None and found[0]["last_error"] == ERROR


def test_a_replay_after_the_bypass_wins() -> None:
    still_listed = FakeBypass("s", T0 + MIN, T0 + 2 * MIN)  # its tombstone not read yet
    committed = [w(0, 1), w(1, 2, "bypass"), w(2, 3), w(1, 2, "replayed", attempts=1)]
    found = cells(stream(), committed, [still_listed])
    assert shown(found) == [(0, "acked"), (1, "replayed"), (2, "acked")]
    assert found[1]["committed_ms"] == T0 + 2 * MIN + 150 and found[1]["bypassed_ms"] is None


def test_the_current_window_is_retrying_after_a_failure_and_held_while_the_guard_holds() -> None:
    retrying = stream(window=(T0 + 3 * MIN, T0 + 4 * MIN), attempt=4, last_error=ERROR)
    (_, current) = cells(retrying, [w(2, 3)], [])
    assert (current["outcome"], current["attempts"], current["last_error"]) == (
        "retrying", 4, ERROR
    )  # fmt: skip
    held = stream(window=(T0 + 3 * MIN, T0 + 4 * MIN), attempt=9, last_error=ERROR,
                  held_since_ms=T0 + 8 * MIN)  # fmt: skip
    (_, current) = cells(held, [w(2, 3)], [])
    assert (current["outcome"], current["held_since_ms"]) == ("held", T0 + 8 * MIN)


def test_an_ack_after_a_hold_keeps_how_long_it_was_held() -> None:
    (cell,) = cells(stream(), [w(0, 1, attempts=12, held_ms=90_000)], [])
    assert (cell["outcome"], cell["held_ms"], cell["attempts"]) == ("acked", 90_000, 12)


def test_a_current_window_the_tail_already_closed_is_left_out() -> None:
    behind = stream(window=(T0 + 2 * MIN, T0 + 3 * MIN), attempt=1)  # the view is older
    assert shown(cells(behind, [w(1, 2), w(2, 3)], [])) == [(1, "acked"), (2, "acked")]


def test_only_the_most_recent_windows_are_shown() -> None:
    committed = [w(i, i + 1) for i in range(MAX_CELLS + 40)]
    found = cells(stream(window=(T0 + 100 * MIN, T0 + 101 * MIN)), committed, [])
    assert len(found) == MAX_CELLS
    assert shown(found)[0] == (41, "acked") and shown(found)[-1] == (100, "open")
    assert len(cells(stream(), committed, [], limit=5)) == 5


def test_the_document_counts_every_outcome_and_says_what_was_read() -> None:
    recent = Recent((w(0, 1), w(1, 2, "bypass")), 3, 100, 5100, 5000, True, 5000)
    view = stream(window=(T0 + 2 * MIN, T0 + 3 * MIN), attempt=2, last_error=ERROR)
    doc = timeline_document(view, recent, [], T0 + 10 * MIN)
    assert doc["stream_id"] == "s" and doc["now_ms"] == T0 + 10 * MIN
    assert doc["window_ms"] == MIN and doc["state"] == "live"
    assert doc["counts"] == {
        "acked": 1, "partial": 0, "retrying": 1, "held": 0, "bypassed": 1, "replayed": 0,
        "open": 0,
    }  # fmt: skip
    assert doc["history"] == {
        "partition": 3, "from_offset": 100, "to_offset": 5100, "records_read": 5000,
        "complete": True, "limit": 5000, "error": None,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("path", "stream_id"),
    [
        ("/api/streams/orders/timeline", "orders"),
        ("/api/streams/a%2Fb%20c/timeline", "a/b c"),
        ("/api/streams/%3Cb%3Eflaky%3C%2Fb%3E-1/timeline", "<b>flaky</b>-1"),
        ("/api/streams/caf%C3%A9/timeline", "café"),
    ],
)
def test_the_stream_id_is_the_percent_decoded_path_segment(path: str, stream_id: str) -> None:
    assert stream_id_of(path) == stream_id


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/api/streams//timeline", "stream_id: must not be empty"),
        ("/api/streams/" + "x" * 201 + "/timeline", "stream_id: must be at most 200 characters"),
        ("/api/streams/%FF/timeline", "stream_id: is not UTF-8 once percent-decoded"),
    ],
)
def test_a_bad_stream_id_is_refused_naming_the_field(path: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        stream_id_of(path)
    status, doc = answer(path, lambda _: None, lambda _: [], None, T0)
    assert status == HTTPStatus.BAD_REQUEST
    assert doc == {"error": reason, "field": "stream_id"}


def test_the_answer_is_404_for_an_unknown_stream_and_the_document_for_a_known_one() -> None:
    known = {"s": stream()}
    status, doc = answer("/api/streams/gone/timeline", known.get, lambda _: [], None, T0)
    assert (status, doc) == (HTTPStatus.NOT_FOUND, {"error": "unknown stream: gone"})
    listed = FakeBypass("s", T0 - MIN, T0)
    status, doc = answer("/api/streams/s/timeline", known.get, lambda _: [listed], None, T0)
    assert status == HTTPStatus.OK
    assert [c["outcome"] for c in doc["cells"]] == ["bypassed"]
    assert doc["history"]["partition"] is None  # no commits read
