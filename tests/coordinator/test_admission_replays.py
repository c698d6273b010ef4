"""The replay lane under admission: replays count against their source's cap, as REPLAY, the
last class, and still all go out once the classes above leave room."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from streams.core.admission import REPLAY, SourceLimits
from streams.core.replay import replay_from_dict

from .fakes import T0, Driver, ack, nack
from .test_admission import _flying_in_store, answer_all, gated, in_flight, step

SECOND_MS = 1_000
CAP = 2


def _replays_in_flight(d: Driver) -> int:
    """The replay table's windows in flight (the truth the gate counts)."""
    return sum(
        replay_from_dict(json.loads(raw)).in_flight for raw in d.replay_store.snapshot().values()
    )


def _bad(task: dict[str, Any]) -> dict[str, Any]:
    """A nack the streams here do not retry: the window is bypassed, listed for replay."""
    return nack(task, "bad_params")


def _check(d: Driver) -> None:
    gate = d.processor.admission.gates["S"]  # type: ignore[union-attr]
    live = _flying_in_store(d).get("S", 0)
    assert sum(gate.in_flight) == live + _replays_in_flight(d)  # counted as they are
    assert gate.in_flight[REPLAY] == _replays_in_flight(d)
    assert sum(gate.in_flight) <= CAP


def test_replays_count_against_the_cap_and_all_go_out() -> None:
    """S capped at 2. Stream r's windows are bypassed (nacked non-retryable), then replayed
    while two streams of S catch up 30 s. At every step S's tasks in flight, live and replay,
    are what the gate counts, and at most 2; replays go out only once the catching up is done
    (CATCHUP before REPLAY, which share the backfill's floor), and every one is replayed by the
    end, the streams live."""
    d = gated({"S": SourceLimits("S", max_in_flight=CAP)})
    now_ms = T0 + 10 * SECOND_MS + 500
    d.upsert("r", now_ms, source="S", start_ms=T0, window_ms=SECOND_MS, step_ms=SECOND_MS,
             non_retryable=["bad_params"], max_in_flight=2)  # fmt: skip
    answered: set[str] = set()
    for _ in range(30):  # r's windows are bypassed as they go out
        now_ms += 500
        step(d, now_ms)
        _check(d)
        answer_all(d, answered, now_ms, _bad)
    bypassed = {s.json()["start_ms"] for s in d.bypassed() if s.value is not None}
    assert len(bypassed) >= 10
    for i in range(2):
        d.upsert(f"b-{i}", now_ms, source="S", start_ms=now_ms - 30 * SECOND_MS,
                 window_ms=SECOND_MS, step_ms=SECOND_MS, max_in_flight=2)  # fmt: skip
    d.control({"type": "replay", "stream_id": "r", "from_ms": T0, "to_ms": now_ms}, now_ms)
    replays_sent = 0
    caught_up_ms: int | None = None
    for _ in range(200):
        now_ms += 250
        step(d, now_ms)
        _check(d)
        marks = {c["stream_id"]: c["downstream_ms"] for c in d.commits()}
        if caught_up_ms is None and all(
            marks.get(s, 0) >= now_ms - 2 * SECOND_MS for s in ("r", "b-0", "b-1")
        ):
            caught_up_ms = now_ms
        if replays_sent:  # REPLAY waited for CATCHUP
            assert caught_up_ms is not None
        for task in in_flight(d, answered):
            answered.add(task["task_id"])
            replays_sent += bool(task.get("replay"))
            d.result(ack(task), now_ms)
    replayed = {w["start_ms"] for c in d.commits() for w in c["windows"]
                if w["reason"] == "replayed"}  # fmt: skip
    assert replayed >= bypassed, sorted(bypassed - replayed)
    assert replays_sent >= len(bypassed)
    marks = {c["stream_id"]: c["downstream_ms"] for c in d.commits()}
    assert all(marks[f"b-{i}"] >= now_ms - 3 * SECOND_MS for i in range(2)), marks


def test_a_restart_counts_the_replays_in_flight() -> None:
    """A restart with replays in flight counts them from the replay table (as REPLAY), so a
    new process does not send past the cap; their answers free the slots."""
    limits = {"S": SourceLimits("S", max_in_flight=CAP)}
    d = gated(limits)
    now_ms = T0 + 4 * SECOND_MS + 500
    d.upsert("r", now_ms, source="S", start_ms=T0, window_ms=SECOND_MS, step_ms=SECOND_MS,
             non_retryable=["bad_params"], max_in_flight=1)  # fmt: skip
    answered: set[str] = set()
    for _ in range(12):
        now_ms += 500
        step(d, now_ms)
        answer_all(d, answered, now_ms, _bad)
    d.control({"type": "replay", "stream_id": "r", "from_ms": T0, "to_ms": now_ms}, now_ms)
    step(d, now_ms + 100)
    sent: list[dict[str, Any]] = [t for t in in_flight(d, answered) if t.get("replay")]
    assert sent and _replays_in_flight(d) == len(sent)
    again = _restarted(d, limits)
    now_ms += 1_000
    step(again, now_ms)
    gate = again.processor.admission.gates["S"]  # type: ignore[union-attr]
    assert gate.in_flight[REPLAY] == len(sent)
    for task in sent:
        again.result(ack(task), now_ms)
    assert gate.in_flight[REPLAY] == _replays_in_flight(again)


def _restarted(d: Driver, limits: dict[str, SourceLimits]) -> Driver:
    """A new process over the same tables, the streams' and the replays'."""
    return gated(limits, store=d.store, replay_store=d.replay_store)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["ack", "ack", "bad", "bad", "nack", "drop", "replay",
                                           "replay", "wait", "delete", "restart"]),
                          st.integers(0, 1)), min_size=10, max_size=60))  # fmt: skip
def test_the_counts_are_the_live_and_replay_flights_whatever_happens(
    actions: list[tuple[str, int]],
) -> None:
    """Two streams of S (cap 2), a few windows behind: random acks, bypasses (a nack not
    retried), nacks, lost tasks, replays, deletes and restarts. After every step the gate
    counts exactly the stored live and replay windows in flight, never more than the cap, and
    once the worker answers everything no replay waits for ever."""
    limits = {"S": SourceLimits("S", max_in_flight=CAP)}
    d = gated(limits)
    now_ms = T0 + 6 * SECOND_MS + 500
    streams = ["s-0", "s-1"]
    for stream_id in streams:
        d.upsert(stream_id, now_ms, source="S", start_ms=T0, window_ms=SECOND_MS,
                 step_ms=SECOND_MS, max_in_flight=2, task_timeout_ms=2_000,
                 non_retryable=["bad_params"],
                 retry={"strategy": "fixed", "interval_ms": 300})  # fmt: skip
    for _ in range(10):  # until the health views grant a share of the cap
        now_ms += 250
        step(d, now_ms)
    answered: set[str] = set()
    for action, i in actions:
        stream_id = streams[i]
        now_ms += 250
        if action == "restart":
            again = gated(limits, store=d.store, replay_store=d.replay_store)
            again.emitter.sent.extend(d.emitter.sent)  # the topics outlive the process
            d = again  # the tasks given out before are still the worker's to answer
        step(d, now_ms)
        mine = [t for t in in_flight(d, answered) if t["stream_id"] == stream_id]
        if action in ("ack", "bad", "nack", "drop") and mine:
            answered.add(mine[0]["task_id"])
            if action == "ack":
                d.result(ack(mine[0]), now_ms)
            elif action == "bad":
                d.result(nack(mine[0], "bad_params"), now_ms)
            elif action == "nack":
                d.result(nack(mine[0]), now_ms)  # "drop": never answered, it times out
        elif action == "replay":
            d.control({"type": "replay", "stream_id": stream_id, "from_ms": T0,
                       "to_ms": now_ms}, now_ms)  # fmt: skip
        elif action == "wait":
            now_ms += 2_000
        elif action == "delete":
            d.control({"type": "delete", "stream_id": stream_id}, now_ms)
        _counts_hold(d)
    for _ in range(120):  # a worker that answers everything
        now_ms += 250
        step(d, now_ms)
        _counts_hold(d)
        answer_all(d, answered, now_ms)
    replays = sum(1 for t in d.tasks() if t.get("replay"))
    event("replays sent" if replays else "no replay sent")
    queued = [
        (stream_id, w.start_ms)
        for stream_id, raw in d.replay_store.snapshot().items()
        for w in replay_from_dict(json.loads(raw)).listed
        if w.queued or w.attempt
    ]
    assert not queued, queued


def _counts_hold(d: Driver) -> None:
    gates = d.processor.admission.gates  # type: ignore[union-attr]
    counted = {s: sum(g.in_flight) for s, g in gates.items() if sum(g.in_flight)}
    assert counted == _flying_in_store(d, replays=True)
    assert all(sum(g.in_flight) <= CAP for g in gates.values())
