"""The stored record: the core's state plus the outbox of announcements not yet confirmed."""

from __future__ import annotations

import json
import tracemalloc

import orjson

from streams.coordinator.record import Record, stored_summary, summary_of
from streams.core import (
    Commit,
    CommittedWindow,
    ErrorInfo,
    Fixed,
    Result,
    StreamConfig,
    StreamState,
    announce,
    apply_result,
    create_state,
    next_due_ms,
    state_to_dict,
)
from streams.core.model import CloseReason

from .fakes import T0, at

MINUTE_MS = 60_000


def busy_state() -> StreamState:
    """cluster-a at 10:05 with 3 windows in flight, the first acked and flushed, the second
    nacked (retrying), so the state has announced and outstanding parts."""
    config = StreamConfig(
        "cluster-a", T0, max_in_flight=3, retry=Fixed(30_000), params={"query": "up"}
    )
    decision = create_state(config, at(10, 5))
    state = decision.state
    assert state is not None and len(decision.tasks) == 3
    first, second, _ = decision.tasks
    apply_result(
        state, Result("cluster-a", first.start_ms, first.end_ms, 1, "ack", first.end_ms), at(10, 5)
    )
    announce(state, at(10, 5))
    error = ErrorInfo("no_data", "nothing yet")
    apply_result(
        state,
        Result("cluster-a", second.start_ms, second.end_ms, 1, "nack", error=error),
        at(10, 5),
    )
    return state


def cw(minute: int, reason: CloseReason = "ack", attempts: int = 1) -> CommittedWindow:
    """The committed window (10:minute, 10:minute+1]."""
    return CommittedWindow(at(10, minute), at(10, minute + 1), reason, attempts)


def bypass_wire(minute: int) -> dict[str, object]:
    return {
        "stream_id": "cluster-a",
        "start_ms": at(10, minute),
        "end_ms": at(10, minute + 1),
        "attempts": 3,
        "first_failed_ms": at(10, minute + 1),
        "bypassed_ms": at(10, minute + 6),
        "last_error": {"kind": "no_data", "message": "x"},
    }


def test_a_new_record_starts_its_outbox_where_the_state_was_announced() -> None:
    state = busy_state()
    record = Record.new(state)
    assert record.outbox_previous_ms == state.announced_ms == at(10, 1)
    assert record.outbox == [] and record.pending_bypasses == []
    assert record.outbox_commit(at(10, 6)) is None


def test_a_record_round_trips_through_its_bytes() -> None:
    record = Record(busy_state(), at(10, 0), [cw(0), cw(1, "bypass", 4)], [bypass_wire(1)])
    raw = record.encode()

    decoded = Record.decode(raw)
    assert decoded == record
    assert decoded.encode() == raw
    assert json.loads(raw)["o"] == [
        at(10, 0),
        [[at(10, 0), at(10, 1), "ack", 1], [at(10, 1), at(10, 2), "bypass", 4]],
    ]


def test_a_record_stored_with_the_readable_state_form_still_decodes() -> None:
    """Stores written before the stored row (schema 2) hold the state as a dict (schema 1)."""
    record = Record(busy_state(), at(10, 0), [cw(0)], [bypass_wire(1)], bypasses=2)
    doc = json.loads(record.encode())
    assert doc["s"][0] == 2
    doc["s"] = state_to_dict(record.state)
    assert Record.decode(orjson.dumps(doc)) == record


def test_an_empty_outbox_is_left_out_of_the_bytes() -> None:
    record = Record.new(busy_state())
    doc = json.loads(record.encode())
    assert set(doc) == {"s", "x"}
    assert Record.decode(record.encode()) == record


def test_announce_keeps_the_previous_ms_of_the_oldest_unconfirmed_commit() -> None:
    record = Record.new(busy_state())
    record.announce(Commit("cluster-a", at(10, 2), at(10, 1), at(10, 6), (cw(1),)))
    record.announce(Commit("cluster-a", at(10, 4), at(10, 2), at(10, 7), (cw(2), cw(3))))

    assert record.outbox_previous_ms == at(10, 1)
    assert record.outbox == [cw(1), cw(2), cw(3)]
    assert record.outbox_commit(at(10, 8)) == Commit(
        "cluster-a", at(10, 4), at(10, 1), at(10, 8), (cw(1), cw(2), cw(3))
    )


def test_confirm_commits_forgets_the_windows_delivered_commits_cover() -> None:
    record = Record(busy_state(), at(10, 0), [cw(0), cw(1), cw(2)])

    assert record.confirm_commits([(at(10, 0), at(10, 1)), (at(10, 1), at(10, 2))]) is True
    assert record.outbox == [cw(2)] and record.outbox_previous_ms == at(10, 2)
    assert record.outbox_commit(at(10, 9)) == Commit(
        "cluster-a", at(10, 3), at(10, 2), at(10, 9), (cw(2),)
    )

    assert record.confirm_commits([(at(10, 0), at(10, 1))]) is False  # older: no change
    assert record.outbox == [cw(2)] and record.outbox_previous_ms == at(10, 2)

    assert record.confirm_commits([(at(10, 2), at(10, 3))]) is True
    assert record.outbox == [] and record.outbox_commit(at(10, 9)) is None
    announced_after = Commit("cluster-a", at(10, 4), at(10, 3), at(10, 9), (cw(3),))
    record.announce(announced_after)  # the next commit starts a fresh outbox
    assert record.outbox_commit(at(10, 9)) == announced_after


def test_a_commit_delivered_after_one_that_failed_leaves_the_outbox_as_it_was() -> None:
    record = Record(busy_state(), at(10, 0), [cw(0), cw(1), cw(2)])

    # (10:00, 10:01] failed and (10:01, 10:02] was delivered: a hole, so nothing may leave
    assert record.confirm_commits([(at(10, 1), at(10, 2))]) is False
    assert record.outbox == [cw(0), cw(1), cw(2)]
    # the outbox announced again as one commit, delivered this time
    assert record.confirm_commits([(at(10, 1), at(10, 2)), (at(10, 0), at(10, 3))]) is True
    assert record.outbox == [] and record.outbox_previous_ms == at(10, 3)


def test_a_re_announced_commit_from_before_the_mark_confirms_past_it() -> None:
    record = Record(busy_state(), at(10, 1), [cw(1), cw(2)])
    assert record.confirm_commits([(at(10, 0), at(10, 2))]) is True
    assert record.outbox == [cw(2)] and record.outbox_previous_ms == at(10, 2)


def test_confirm_commits_of_a_partial_ack_keeps_the_window_past_it() -> None:
    partial = CommittedWindow(at(10, 0), at(10, 0, 30), "ack", 1)
    rest = CommittedWindow(at(10, 0, 30), at(10, 1), "ack", 1)
    record = Record(busy_state(), at(10, 0), [partial, rest])

    assert record.confirm_commits([(at(10, 0), at(10, 0, 30))]) is True
    assert record.outbox == [rest] and record.outbox_previous_ms == at(10, 0, 30)


def test_the_config_json_is_reused_until_the_config_changes() -> None:
    record = Record.new(busy_state())
    first = record.encode()
    cached = record._stored_config
    assert cached is not None and cached[0] is record.state.config
    assert record.encode() == first and record._stored_config is cached
    whole = record.config_json()
    assert record.config_json() is whole and record._config_json is not None

    record.state.config = StreamConfig("cluster-a", T0, max_in_flight=2)
    changed = Record.decode(record.encode())
    assert changed.state.config.max_in_flight == 2 and record._stored_config is not cached
    assert record.config_json() is not whole
    assert orjson.loads(orjson.dumps(record.config_json()))["max_in_flight"] == 2


def test_confirm_bypasses_forgets_the_delivered_records_by_start() -> None:
    record = Record(busy_state(), at(10, 1), [], [bypass_wire(1), bypass_wire(3)])

    assert record.confirm_bypasses({at(10, 3), at(10, 7)}) is True
    assert record.pending_bypasses == [bypass_wire(1)]
    assert record.confirm_bypasses({at(10, 3)}) is False
    assert record.confirm_bypasses({at(10, 1)}) is True
    assert record.pending_bypasses == []
    assert set(json.loads(record.encode())) == {"s", "x"}


def test_the_stored_summary_is_what_the_core_says_of_the_state() -> None:
    state = busy_state()
    summary = stored_summary(Record.new(state).encode())
    assert summary == summary_of(state)
    assert summary is not None
    assert (summary.in_flight, summary.failing, summary.held) == (2, True, False)
    assert summary.wake_ms == next_due_ms(state) is not None


def test_a_record_with_announcements_to_send_again_has_no_summary_to_rebuild_from() -> None:
    assert stored_summary(Record(busy_state(), at(10, 0), [cw(0)]).encode()) is None
    assert stored_summary(Record(busy_state(), at(10, 1), [], [bypass_wire(1)]).encode()) is None


def test_the_summary_is_found_whatever_the_params_and_source_hold() -> None:
    tricky = ',"x":[1,2]}'  # what the summary member looks like, inside a key and a value
    config = StreamConfig(
        "cluster-a", T0, params={"x": [tricky], tricky: {"x": [1]}}, source=f"src{tricky}"
    )
    state = create_state(config, at(10, 0)).state
    assert state is not None
    raw = Record.new(state).encode()
    assert stored_summary(raw) == summary_of(state)
    assert stored_summary(raw).source == f"src{tricky}"  # type: ignore[union-attr]


def test_bytes_without_a_well_formed_summary_are_decoded_whole() -> None:
    raw = Record.new(busy_state()).encode()
    doc = json.loads(raw)
    del doc["x"]
    assert stored_summary(json.dumps(doc).encode()) is None  # a record from before summaries
    for broken in ([1, 2], [None] * 10, ["7", *doc_x(raw)[1:]], [*doc_x(raw)[:9], "no"]):
        assert stored_summary(json.dumps({**doc, "x": broken}).encode()) is None
    assert stored_summary(b"\x00 not a record") is None


def doc_x(raw: bytes) -> list[object]:
    x: list[object] = json.loads(raw)["x"]
    return x


def test_the_bytes_a_record_keeps_are_no_larger_than_what_they_hold() -> None:
    """orjson.dumps returns bytes that keep its whole output buffer (4 KiB for a small
    document): a record's encoding and its cached config JSONs (stored and whole) are copies of
    their length."""
    records = [Record.new(busy_state()) for _ in range(100)]
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        kept = [(record.encode(), record.config_json()) for record in records]
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    stored = records[0].stored_config_json()
    size = len(kept[0][0]) + len(orjson.dumps(kept[0][1])) + len(orjson.dumps(stored))
    assert (after - before) / len(records) < size + 500  # objects' headers, not 4 KiB buffers
