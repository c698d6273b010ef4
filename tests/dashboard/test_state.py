"""The `/api/state` document as a pure function of a snapshot and `now_ms`."""

from __future__ import annotations

from streams.dashboard.state import MAX_MESSAGE_CHARS, RECENT_BYPASSES, Snapshot, state_document
from tests.dashboard.fakes import FakeBypass, FakeStream

NOW = 1_800_000_000_000


def test_streams_come_largest_lag_first_with_unknown_lag_last() -> None:
    views = [
        FakeStream("new"),  # no downstream yet: no lag
        FakeStream("b", downstream_ms=NOW - 5_000),
        FakeStream("a", downstream_ms=NOW - 5_000),
        FakeStream("far", downstream_ms=NOW - 3_600_000, state_name="catching up"),
    ]
    doc = state_document(Snapshot.of(views, [], NOW - 200), NOW)
    assert [s["stream_id"] for s in doc["streams"]] == ["far", "a", "b", "new"]
    assert [s["lag_ms"] for s in doc["streams"]] == [3_600_000, 5_000, 5_000, None]
    assert doc["now_ms"] == NOW
    assert doc["refreshed_ms"] == NOW - 200
    assert doc["refresh_error"] is None


def test_a_stream_carries_what_the_page_shows_and_nothing_else() -> None:
    view = FakeStream(
        "s1",
        downstream_ms=NOW - 60_000,
        state_name="retrying",
        window=(NOW - 60_000, NOW),
        attempt=4,
        last_error={"kind": "no_data", "message": "empty", "trace": "not shown"},
        bypasses=2,
        last_commit_ms=NOW - 61_000,
        config={"params": {"token": "secret"}},
        pipeline="logs",
    )
    (stream,) = state_document(Snapshot.of([view], [], NOW), NOW)["streams"]
    assert stream == {
        "stream_id": "s1",
        "state": "retrying",
        "lag_ms": 60_000,
        "downstream_ms": NOW - 60_000,
        "last_commit_ms": NOW - 61_000,
        "window": {"start_ms": NOW - 60_000, "end_ms": NOW},
        "attempt": 4,
        "last_error": {"kind": "no_data", "message": "empty"},
        "bypasses": 2,
        "paused": False,
        "pipeline": "logs",  # which workers run it: shown, where the config is not
    }


def test_counts_cover_every_state_even_when_zero() -> None:
    views = [FakeStream("a"), FakeStream("b"), FakeStream("c", state_name="paused")]
    counts = state_document(Snapshot.of(views, [], NOW), NOW)["counts"]
    assert counts == {"live": 2, "catching up": 0, "retrying": 0, "paused": 1, "finished": 0}


def test_bypasses_most_recent_first_bounded_with_replay_commands() -> None:
    views = [FakeBypass("s", i * 60_000, (i + 1) * 60_000, bypassed_ms=i) for i in range(60)]
    bypasses = state_document(Snapshot.of([], views, NOW), NOW)["bypasses"]
    assert len(bypasses) == RECENT_BYPASSES
    assert bypasses[0] == {
        "stream_id": "s",
        "start_ms": 59 * 60_000,
        "end_ms": 60 * 60_000,
        "attempts": 3,
        "first_failed_ms": 0,
        "bypassed_ms": 59,
        "last_error": None,
        "replay_command": f"tidemark replay s --from {59 * 60_000} --to {60 * 60_000}",
    }
    assert [b["bypassed_ms"] for b in bypasses] == list(range(59, 9, -1))


def test_long_error_messages_are_cut() -> None:
    view = FakeStream("s", last_error={"kind": "k", "message": "x" * 10_000})
    (stream,) = state_document(Snapshot.of([view], [], NOW), NOW)["streams"]
    assert len(stream["last_error"]["message"]) == MAX_MESSAGE_CHARS


def test_snapshot_copies_views_so_later_changes_do_not_show() -> None:
    view = FakeStream("s", downstream_ms=NOW - 1000)
    snapshot = Snapshot.of([view], [], NOW)
    view.downstream_ms = NOW
    assert state_document(snapshot, NOW)["streams"][0]["downstream_ms"] == NOW - 1000
