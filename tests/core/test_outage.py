"""The outage guard's pure rule: sources, the outage decision, holds, release and held_ms."""

from __future__ import annotations

from typing import Any

import pytest

from streams.core import (
    Immediate,
    OutagePolicy,
    SourceCounts,
    StreamConfig,
    advance,
    announce,
    apply_control,
    apply_result,
    config_from_dict,
    config_to_dict,
    in_outage,
    is_failing,
    release,
    sources_in_outage,
    state_from_dict,
    state_to_dict,
)
from streams.core.codec import committed_from_list, committed_to_list
from streams.core.model import CommittedWindow, Pause, Resume
from streams.core.outage import DEFAULT_OUTAGE_MAX_HOLD_MS, hold_started_ms
from streams.core.results import incarnation_of
from streams.errors import InvalidInput

from .helpers import MINUTE_MS, ack, at, config, nack, only, started

HOLD_MS = DEFAULT_OUTAGE_MAX_HOLD_MS


# -- the source in a config ------------------------------------------------------------------------


def test_a_stream_has_no_source_unless_it_names_one() -> None:
    assert config().source is None
    assert config(source="thanos-eu-1").source == "thanos-eu-1"


@pytest.mark.parametrize("bad", ["", "x" * 201, 7, b"thanos", ["thanos"]])
def test_a_bad_source_is_rejected_naming_the_field(bad: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        config(source=bad)
    assert caught.value.field == "source"


def test_a_source_round_trips_and_is_left_out_of_a_config_without_one() -> None:
    with_source = config(source="http://thanos-query:9090")
    assert config_to_dict(with_source)["source"] == "http://thanos-query:9090"
    assert config_from_dict(config_to_dict(with_source)) == with_source
    assert "source" not in config_to_dict(config())
    assert config_from_dict({**config_to_dict(config()), "source": None}) == config()


def test_a_config_without_a_source_keeps_the_incarnation_it_had_before_sources() -> None:
    # The hash input of a config without a source is its wire dict as it was (no "source" key).
    plain = config()
    assert incarnation_of(plain, at(10, 1)) != incarnation_of(config(source="s"), at(10, 1))
    assert set(config_to_dict(plain)) == {
        "stream_id",
        "start_ms",
        "window_ms",
        "step_ms",
        "delay_ms",
        "task_timeout_ms",
        "bypass_after_ms",
        "retry",
        "max_attempts",
        "non_retryable",
        "max_in_flight",
        "params",
        "end_ms",  # the bounded streams' fields (issue 12) are always there
        "gc_grace_ms",
        "bypass_retention_ms",
    }


# -- the policy and the outage decision ------------------------------------------------------------


def test_the_policy_defaults_are_half_three_streams_and_six_hours() -> None:
    policy = OutagePolicy()
    assert (policy.ratio, policy.min_streams, policy.max_hold_ms) == (0.5, 3, 6 * 3_600_000)
    assert (policy.hold_ms(True), policy.hold_ms(False)) == (6 * 3_600_000, 0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"ratio": 0}, "outage_ratio"),
        ({"ratio": 1.5}, "outage_ratio"),
        ({"ratio": float("nan")}, "outage_ratio"),
        ({"ratio": True}, "outage_ratio"),
        ({"ratio": "0.5"}, "outage_ratio"),
        ({"min_streams": 0}, "outage_min_streams"),
        ({"min_streams": 2.0}, "outage_min_streams"),
        ({"max_hold_ms": -1}, "outage_max_hold_ms"),
        ({"max_hold_ms": 10**16}, "outage_max_hold_ms"),
    ],
)
def test_a_bad_policy_is_rejected_naming_the_setting(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        OutagePolicy(**kwargs)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("failing", "total", "expected"),
    [
        (3, 6, True),  # exactly the ratio, exactly the minimum
        (840, 1000, True),
        (3, 3, True),
        (2, 2, False),  # every stream fails, but fewer than outage_min_streams
        (3, 7, False),  # 43 %
        (499, 1000, False),
        (500, 1000, True),
        (0, 0, False),
        (0, 10, False),
    ],
)
def test_a_source_is_in_outage_when_enough_of_its_streams_fail(
    failing: int, total: int, expected: bool
) -> None:
    assert in_outage(SourceCounts(failing, total), OutagePolicy()) is expected


def test_the_ratio_and_the_minimum_are_settings() -> None:
    assert in_outage(SourceCounts(1, 4), OutagePolicy(ratio=0.25, min_streams=1))
    assert not in_outage(SourceCounts(9, 10), OutagePolicy(ratio=1.0, min_streams=1))
    assert in_outage(SourceCounts(10, 10), OutagePolicy(ratio=1.0, min_streams=10))


def test_sources_in_outage_picks_the_failing_sources() -> None:
    counts = {"s": SourceCounts(4, 4), "r": SourceCounts(1, 1), "q": SourceCounts(3, 10)}
    assert sources_in_outage(counts, OutagePolicy()) == {"s"}


def test_a_stream_is_failing_from_a_failure_until_the_window_closes() -> None:
    state, (task,) = started(at(10, 1))
    assert not is_failing(state)
    apply_result(state, nack(task), at(10, 1, 5))
    assert is_failing(state)
    retry = only(advance(state, at(10, 2, 5)))
    assert is_failing(state)  # in flight again, still failing
    apply_result(state, ack(retry), at(10, 2, 6))
    assert not is_failing(state)


def test_a_paused_stream_is_not_failing_until_it_resumes() -> None:
    """A paused stream dispatches nothing, so its failed window says nothing about its source
    now (issue 25, defect 7: paused failing streams kept a source in outage for good)."""
    state, (task,) = started(at(10, 1))
    apply_result(state, nack(task), at(10, 1, 5))
    apply_control(state, Pause("cluster-a"), at(10, 1, 10))
    assert not is_failing(state)
    apply_control(state, Resume("cluster-a"), at(11, 1, 10))
    assert is_failing(state)  # its window failed and is still open: failing again


def test_a_bypassed_window_leaves_the_stream_not_failing() -> None:
    state, (task,) = started(at(10, 1), non_retryable={"bad_query"})
    apply_result(state, nack(task, "bad_query"), at(10, 1, 5))
    assert not is_failing(state)


# -- the hold --------------------------------------------------------------------------------------


def _fail_every_minute(state: Any, task: Any, until_minute: int, hold_ms: int) -> list[Any]:
    """Nack `task` at 10:01:05, then each retry as it goes out, each minute; the decisions."""
    decisions = [apply_result(state, nack(task), at(10, 1, 5), hold_ms)]
    for minute in range(2, until_minute + 1):
        retry = only(advance(state, at(10, minute, 5), max_hold_ms=hold_ms))
        decisions.append(apply_result(state, nack(retry), at(10, minute, 5), hold_ms))
        if decisions[-1].bypasses:
            break
    return decisions


def test_without_an_outage_the_seed_rule_bypasses_at_10_06_05() -> None:
    state, (task,) = started(at(10, 1))
    decisions = _fail_every_minute(state, task, 6, 0)
    assert [bool(d.bypasses) for d in decisions] == [False] * 5 + [True]
    assert state.downstream_ms == at(10, 1)


def test_in_outage_the_time_based_bypass_is_held_and_the_window_keeps_retrying() -> None:
    state, (task,) = started(at(10, 1))

    decisions = _fail_every_minute(state, task, 20, HOLD_MS)

    assert all(not d.bypasses for d in decisions)
    assert [d.requeues for d in decisions] == [1] * 20
    (window,) = state.windows
    assert window.held_since_ms == at(10, 6, 5)  # the failure at which the seed bypassed it
    assert (window.retried_count, window.due_ms) == (20, at(10, 21, 5))
    assert state.downstream_ms == at(10, 0)
    assert hold_started_ms(state) == at(10, 6, 5)


def test_a_held_window_that_acks_commits_as_an_ack_with_held_ms() -> None:
    state, (task,) = started(at(10, 1))
    _fail_every_minute(state, task, 10, HOLD_MS)
    retry = only(advance(state, at(10, 11, 5), max_hold_ms=HOLD_MS))

    decision = apply_result(state, ack(retry), at(10, 11, 7))

    assert decision.bypasses == ()
    _, commit = announce(state, at(10, 11, 7))
    assert commit is not None
    assert [w.to_wire() for w in commit.windows] == [
        {
            "start_ms": at(10, 0),
            "end_ms": at(10, 1),
            "reason": "ack",
            "attempts": 11,
            "held_ms": at(10, 11, 7) - at(10, 6, 5),
        }
    ]


def test_a_window_never_held_commits_without_held_ms() -> None:
    state, (task,) = started(at(10, 1))
    _fail_every_minute(state, task, 3, HOLD_MS)  # in outage, but within its budget
    retry = only(advance(state, at(10, 4, 5), max_hold_ms=HOLD_MS))
    apply_result(state, ack(retry), at(10, 4, 6))
    _, commit = announce(state, at(10, 4, 6))
    assert commit is not None
    assert "held_ms" not in commit.windows[0].to_wire()


def test_after_outage_max_hold_ms_the_normal_rule_bypasses_at_the_next_failure() -> None:
    state, (task,) = started(at(10, 1))
    hold_ms = 10 * MINUTE_MS

    decisions = _fail_every_minute(state, task, 30, hold_ms)

    assert len(decisions) == 16  # 10:01:05 ... 10:16:05, the first failure 10 min into the hold
    (bypass,) = decisions[-1].bypasses
    assert (bypass.first_failed_ms, bypass.bypassed_ms) == (at(10, 1, 5), at(10, 16, 5))
    _, commit = announce(state, at(10, 16, 5))
    assert commit is not None and commit.windows[0].reason == "bypass"
    assert commit.windows[0].held_ms == hold_ms


@pytest.mark.parametrize("overrides", [{"non_retryable": {"no_data"}}, {"max_attempts": 2}])
def test_non_retryable_kinds_and_max_attempts_still_bypass_in_an_outage(
    overrides: dict[str, Any],
) -> None:
    state, (task,) = started(at(10, 1), retry=Immediate(), **overrides)
    first = apply_result(state, nack(task), at(10, 1, 5), HOLD_MS)
    if not first.bypasses:
        first = apply_result(state, nack(only(first)), at(10, 1, 6), HOLD_MS)
    assert len(first.bypasses) == 1
    assert state.windows[0].start_ms == at(10, 1)  # the window was given up: the next one is out


def test_a_timeout_is_held_like_a_nack() -> None:
    state, _ = started(at(10, 1), task_timeout_ms=MINUTE_MS, bypass_after_ms=2 * MINUTE_MS)
    for minute in range(2, 12):
        decision = advance(state, at(10, minute), max_hold_ms=HOLD_MS)
        assert decision.bypasses == ()
        assert decision.timeouts == (1 if minute % 2 == 0 else 0)
    assert state.windows[0].held_since_ms == at(10, 4)
    seed, _ = started(at(10, 1), task_timeout_ms=MINUTE_MS, bypass_after_ms=2 * MINUTE_MS)
    bypassed = [bool(advance(seed, at(10, minute)).bypasses) for minute in range(2, 5)]
    assert bypassed == [False, False, True]


def test_a_hold_is_counted_from_its_first_start_across_outages() -> None:
    state, (task,) = started(at(10, 1))
    hold_ms = 10 * MINUTE_MS
    decisions = _fail_every_minute(state, task, 8, hold_ms)  # held from 10:06:05
    assert not any(d.bypasses for d in decisions)
    retry = only(release(state, at(10, 8, 30)))  # the source recovered for a moment
    for minute in range(9, 30):  # and is down again: each retry fails, a minute apart
        decision = apply_result(state, nack(retry), at(10, minute - 1, 31), hold_ms)
        if decision.bypasses:
            break
        retry = only(advance(state, at(10, minute, 31), max_hold_ms=hold_ms))
    (bypass,) = decision.bypasses
    assert bypass.bypassed_ms == at(10, 16, 31)  # the first failure 10 min past 10:06:05


# -- recovery: release -----------------------------------------------------------------------------


def test_on_recovery_a_held_window_goes_out_at_once() -> None:
    state, (task,) = started(at(10, 1))
    _fail_every_minute(state, task, 8, HOLD_MS)
    assert state.windows[0].due_ms == at(10, 9, 5)

    retry = only(release(state, at(10, 8, 30)))

    assert (retry.start_ms, retry.attempt, retry.dispatched_ms) == (at(10, 0), 9, at(10, 8, 30))


def test_after_recovery_a_held_window_that_fails_again_is_bypassed() -> None:
    state, (task,) = started(at(10, 1))
    _fail_every_minute(state, task, 8, HOLD_MS)
    retry = only(release(state, at(10, 8, 30)))

    decision = apply_result(state, nack(retry), at(10, 8, 31))  # max_hold_ms 0: no outage

    (bypass,) = decision.bypasses
    assert bypass.bypassed_ms == at(10, 8, 31)


def test_after_recovery_a_held_window_that_acks_carries_held_ms() -> None:
    state, (task,) = started(at(10, 1))
    _fail_every_minute(state, task, 8, HOLD_MS)
    retry = only(release(state, at(10, 8, 30)))
    apply_result(state, ack(retry), at(10, 8, 32))
    assert state.unannounced[0].held_ms == at(10, 8, 32) - at(10, 6, 5)


def test_release_leaves_windows_that_are_not_held_to_their_retry() -> None:
    state, (task,) = started(at(10, 1))
    apply_result(state, nack(task), at(10, 1, 5), HOLD_MS)  # failing, within its budget
    before = state_to_dict(state)
    assert release(state, at(10, 1, 30)).tasks == ()
    assert state_to_dict(state) == before


def test_release_of_a_held_window_in_flight_sends_nothing_twice() -> None:
    state, (task,) = started(at(10, 1))
    _fail_every_minute(state, task, 8, HOLD_MS)
    only(advance(state, at(10, 9, 5), max_hold_ms=HOLD_MS))
    assert release(state, at(10, 9, 6)).tasks == ()


def test_a_paused_stream_releases_its_held_windows_when_it_resumes() -> None:
    state, (task,) = started(at(10, 1))
    _fail_every_minute(state, task, 8, HOLD_MS)
    apply_control(state, Pause("cluster-a"), at(10, 8, 10))
    assert release(state, at(10, 8, 30)).tasks == ()
    retry = only(apply_control(state, Resume("cluster-a"), at(10, 8, 40)))
    assert retry.dispatched_ms == at(10, 8, 40)


def test_release_rejects_a_time_that_is_no_integer() -> None:
    state, _ = started(at(10, 1))
    assert release(state, 1.5).rejected == "now_ms must be an integer"  # type: ignore[arg-type]


def test_a_partial_ack_of_a_held_window_leaves_a_fresh_remainder() -> None:
    state, (first, _) = started(at(10, 2), max_in_flight=2, retry=Immediate())
    decision = apply_result(state, nack(first), at(10, 2, 1), HOLD_MS)
    for second in range(2, 7 * 60, 60):
        decision = apply_result(state, nack(only(decision)), at(10, 2, second), HOLD_MS)
    assert state.windows[0].held_since_ms is not None
    retry = only(decision)
    apply_result(state, ack(retry, at(10, 0, 30)), at(10, 9))
    (done,) = state.unannounced
    assert done.held_ms is not None and done.end_ms == at(10, 0, 30)
    remainder = state.windows[0]
    assert (remainder.start_ms, remainder.held_since_ms, remainder.first_failed_ms) == (
        at(10, 0, 30),
        None,
        None,
    )


def test_a_clock_stepped_back_reads_as_no_time_held() -> None:
    state, (task,) = started(at(10, 1))
    _fail_every_minute(state, task, 8, HOLD_MS)
    retry = only(release(state, at(10, 8, 30)))
    apply_result(state, ack(retry), at(10, 5))
    assert state.unannounced[0].held_ms == 0


def test_a_zero_max_hold_never_holds() -> None:
    state, (task,) = started(at(10, 1))
    decisions = _fail_every_minute(state, task, 6, OutagePolicy(max_hold_ms=0).hold_ms(True))
    assert decisions[-1].bypasses and state.windows[0].held_since_ms is None


# -- encodings -------------------------------------------------------------------------------------


def test_a_held_state_round_trips_through_the_codec() -> None:
    state, (task,) = started(at(10, 1), source="s")
    _fail_every_minute(state, task, 8, HOLD_MS)
    doc = state_to_dict(state)
    assert doc["windows"][0]["held_since_ms"] == at(10, 6, 5)
    assert doc["config"]["source"] == "s"
    assert state_from_dict(doc) == state


def test_held_ms_is_the_fifth_item_of_a_committed_window_and_optional() -> None:
    held = CommittedWindow(1, 2, "ack", 3, 4)
    assert committed_to_list(held) == [1, 2, "ack", 3, 4]
    assert committed_to_list(CommittedWindow(1, 2, "ack", 3)) == [1, 2, "ack", 3]
    assert committed_from_list("x", [1, 2, "ack", 3, 4]) == held
    assert committed_from_list("x", [1, 2, "ack", 3]).held_ms is None


@pytest.mark.parametrize("bad", [[1, 2, "ack", 3, -1], [1, 2, "ack", 3, "4"], [1, 2, "ack"], 7])
def test_a_malformed_committed_window_names_the_field(bad: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        committed_from_list("unannounced", bad)
    assert caught.value.field == "unannounced"


def test_a_bad_held_since_in_a_stored_state_names_the_field() -> None:
    state, _ = started(at(10, 1))
    doc = state_to_dict(state)
    doc["windows"][0]["held_since_ms"] = "soon"
    with pytest.raises(InvalidInput) as caught:
        state_from_dict(doc)
    assert caught.value.field == "windows.held_since_ms"


def test_configs_with_and_without_source_are_different_configs() -> None:
    assert StreamConfig("a", 0) != StreamConfig("a", 0, source="s")
