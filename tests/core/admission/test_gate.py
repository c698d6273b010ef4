"""The admission gate: the rule table's examples, and its invariants over random sequences of
admit, answer, wait, time, share and recovery steps (property)."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.admission import (
    CATCHUP,
    LIVE,
    REPLAY,
    Class,
    SourceGate,
    SourceLimits,
    backfill_floor,
    classify,
)

T0 = 1_795_946_400_000
MINUTE_MS = 60_000


def _gate(**limits: object) -> SourceGate:
    return SourceGate(SourceLimits("thanos", **limits), T0)  # type: ignore[arg-type]


def _wait(gate: SourceGate, klass: Class, count: int) -> None:
    for _ in range(count):
        gate.waiting(klass, +1)


def test_classify_live_catchup_and_replay() -> None:
    end = T0
    assert classify(end, end + 5_000, MINUTE_MS, "live") is LIVE
    assert classify(end, end + MINUTE_MS, MINUTE_MS, "live") is LIVE
    assert classify(end, end + MINUTE_MS + 1, MINUTE_MS, "live") is CATCHUP  # stale
    assert classify(end - MINUTE_MS, end + 5_000, MINUTE_MS, "live") is CATCHUP  # older
    assert classify(end, end + 5_000, MINUTE_MS, "replay") is REPLAY


def test_the_backfill_floor_rounds_up_and_leaves_live_a_slot() -> None:
    assert [backfill_floor(0.2, cap) for cap in (1, 2, 5, 6, 10, 20)] == [0, 1, 1, 2, 2, 4]
    assert backfill_floor(0.9, 4) == 3 and backfill_floor(0.0, 10) == 0


def test_an_unlimited_gate_admits_everything() -> None:
    gate = _gate()
    assert all(gate.admit(klass, T0) for klass in (LIVE, CATCHUP, REPLAY) for _ in range(500))
    assert gate.cap() is None and gate.in_flight == [500, 500, 500]
    assert gate.wake_ms(T0) is None


def test_live_goes_first_but_the_backfill_keeps_its_floor() -> None:
    gate = _gate(max_in_flight=10)  # floor: ceil(0.2 * 10) = 2
    _wait(gate, LIVE, 20)
    _wait(gate, CATCHUP, 20)
    admitted = [gate.admit(LIVE, T0) for _ in range(10)]
    assert admitted == [True] * 8 + [False] * 2  # two slots kept for the waiting backfill
    assert not gate.admit(REPLAY, T0)  # the floor goes to CATCHUP first, which waits
    assert gate.admit(CATCHUP, T0) and gate.admit(CATCHUP, T0)
    assert not gate.admit(CATCHUP, T0) and not gate.admit(LIVE, T0)  # full: only answers help
    assert gate.wake_ms(T0) is None
    gate.answered(CATCHUP, ok=True)
    gate.waiting(CATCHUP, -20)
    gate.waiting(CATCHUP, +1)
    assert not gate.admit(LIVE, T0)  # the freed slot is the backfill's floor
    assert gate.admit(CATCHUP, T0)


def test_backfill_beyond_its_floor_only_when_every_waiting_live_window_fits() -> None:
    gate = _gate(max_in_flight=10)
    _wait(gate, CATCHUP, 50)
    assert [gate.admit(CATCHUP, T0) for _ in range(8)] == [True] * 8  # no LIVE waits
    _wait(gate, LIVE, 2)
    assert not gate.admit(CATCHUP, T0)  # 2 slots left, both for the waiting LIVE windows
    assert gate.admit(LIVE, T0) and gate.admit(LIVE, T0)


def test_replay_comes_after_catch_up_and_live() -> None:
    gate = _gate(max_in_flight=10, backfill_share=0.3)  # floor 3
    _wait(gate, REPLAY, 5)
    _wait(gate, CATCHUP, 1)
    assert gate.admit(REPLAY, T0)  # floor 3 - 0 in flight > 1 CATCHUP waiting
    assert gate.admit(REPLAY, T0)  # 3 - 1 > 1
    _wait(gate, LIVE, 8)
    assert not gate.admit(REPLAY, T0)  # 3 - 2 = 1 floor slot left: CATCHUP's
    assert gate.admit(CATCHUP, T0)


def test_a_rate_keeps_tokens_for_live_and_wakes_at_the_next_token() -> None:
    gate = _gate(rate_per_s=2, burst=2)
    _wait(gate, LIVE, 1)
    _wait(gate, CATCHUP, 5)
    assert gate.admit(CATCHUP, T0)  # 2 tokens: one stays for the waiting LIVE window
    assert not gate.admit(CATCHUP, T0)
    assert gate.admit(LIVE, T0)
    assert not gate.admit(LIVE, T0)
    assert gate.wake_ms(T0) == T0 + 500


def test_without_a_cap_the_backfill_still_gets_its_share_of_the_rate() -> None:
    gate = _gate(rate_per_s=10, burst=1, backfill_share=0.2)
    _wait(gate, LIVE, 1_000)
    _wait(gate, CATCHUP, 1_000)
    counts = {LIVE: 0, CATCHUP: 0}
    for step in range(1, 1_001):  # 100 s, every class offered at each token, LIVE first
        now_ms = T0 + step * 100
        for klass in (LIVE, CATCHUP):
            if gate.admit(klass, now_ms):
                counts[klass] += 1
                gate.answered(klass, ok=True)
    assert counts[LIVE] + counts[CATCHUP] == 1_000
    assert 0.19 <= counts[CATCHUP] / 1_000 <= 0.21


def test_a_recovery_is_paced_then_unpaced_and_live_still_goes_first() -> None:
    gate = _gate(max_in_flight=20, pace_start=4)
    gate.start_recovery(T0)
    assert gate.cap() == 4 and gate.pacer.active
    _wait(gate, LIVE, 3)
    _wait(gate, CATCHUP, 297)
    assert [gate.admit(LIVE, T0) for _ in range(3)] == [True, True, True]
    assert gate.admit(CATCHUP, T0) and not gate.admit(CATCHUP, T0)
    for klass in (LIVE, LIVE, LIVE, CATCHUP):
        gate.answered(klass, ok=True)
    gate.waiting(LIVE, -3)
    assert gate.cap() == 8
    gate.answered(CATCHUP, ok=False)  # nothing in flight of it: the count stays at 0
    assert gate.cap() == 4 and gate.in_flight == [0, 0, 0]


def test_an_unlimited_source_is_paced_at_recovery_until_the_level_covers_its_demand() -> None:
    gate = _gate()
    gate.start_recovery(T0, backlog=5)  # 5 held: more than the pace_start of 4
    _wait(gate, CATCHUP, 6)
    assert sum(gate.admit(CATCHUP, T0) for _ in range(6)) == 4
    gate.waiting(CATCHUP, -4)
    gate.answered(CATCHUP, ok=True)  # level 5, demand 3 in flight + 2 waiting, backlog 5: ends
    assert not gate.pacer.active and gate.cap() is None
    assert gate.admit(CATCHUP, T0) and gate.admit(CATCHUP, T0)


def test_a_share_below_max_in_flight_caps_this_coordinator() -> None:
    gate = _gate(max_in_flight=20)
    gate.set_share(3)
    assert gate.cap() == 3 and gate.share == 3
    assert sum(gate.admit(LIVE, T0) for _ in range(5)) == 3
    unlimited = _gate(rate_per_s=5)
    unlimited.set_share(3)  # no max_in_flight: no share to take
    assert unlimited.cap() is None


# --- properties ------------------------------------------------------------------------

classes = st.sampled_from([LIVE, CATCHUP, REPLAY])
step = st.one_of(
    st.tuples(st.just("admit"), classes),
    st.tuples(st.just("admit"), classes),
    st.tuples(st.just("answer"), classes, st.booleans()),
    st.tuples(st.just("wait"), classes, st.integers(-3, 6)),
    st.tuples(st.just("time"), st.integers(0, 3_000)),
    st.tuples(st.just("share"), st.integers(0, 30)),
    st.tuples(st.just("recover")),
)
limits = st.builds(
    SourceLimits,
    source=st.just("s"),
    max_in_flight=st.none() | st.integers(1, 30),
    rate_per_s=st.none() | st.floats(0.5, 50),
    backfill_share=st.sampled_from([0.0, 0.1, 0.2, 0.5, 0.9]),
    pace_start=st.integers(1, 8),
)


@settings(max_examples=400, deadline=None)
@given(limits, st.lists(step, max_size=120))
def test_the_gate_keeps_its_rules_over_any_sequence(
    source: SourceLimits, steps: list[tuple[object, ...]]
) -> None:
    gate = SourceGate(source, T0)
    now_ms = T0
    granted: list[int] = []
    for action, *args in steps:
        now_ms = _play(gate, action, args, now_ms,
                       lambda klass, at_ms: _check_admit(gate, klass, at_ms, granted))  # fmt: skip
        assert min(gate.in_flight) >= 0 and min(gate.waiting_counts) >= 0
        paced = gate.pacer.limit()
        if paced is not None and gate.share is not None:
            assert paced < gate.share  # a paced limit is never above the cap
    bucket = gate.bucket
    if bucket is not None:  # never over the bucket's bound, over any interval
        for i in range(len(granted)):
            for j in range(i, len(granted)):
                bound = bucket.burst + bucket.rate_per_s * (granted[j] - granted[i]) / 1000
                assert j - i + 1 <= bound + 1e-6


def _check_admit(gate: SourceGate, klass: Class, now_ms: int, granted: list[int]) -> None:
    cap = gate.cap()
    waiting = list(gate.waiting_counts)
    before = list(gate.in_flight)
    backfill = before[1] + before[2]
    floor = 0 if cap is None else backfill_floor(gate.limits.backfill_share, cap)
    bucket = gate.bucket
    tokens_there = bucket is None or bucket.available(now_ms)
    if (
        bucket is not None
        and klass is LIVE
        and gate.backfill_credit >= 1
        and waiting[1] + waiting[2]
    ):
        tokens_there = bucket.tokens >= 2  # the last token is the waiting backfill's (credit)
    admitted = gate.admit(klass, now_ms)
    after = gate.in_flight
    assert sum(after) == sum(before) + admitted
    if admitted:
        granted.append(now_ms)
    if cap is None:
        if gate.bucket is None:
            assert admitted  # nothing limits: everything goes
        return
    room = cap - sum(before)
    if admitted:
        assert sum(after) <= cap  # never over the cap
    needed = backfill + waiting[1] + waiting[2]
    spare = max(0, min(floor, needed) - backfill)
    if admitted and klass is LIVE:
        # The backfill's floor is never taken by LIVE while the backfill has demand.
        assert cap - sum(after) >= spare
    if admitted and klass is not LIVE and after[1] + after[2] > floor:
        # Beyond its floor the backfill leaves room for every waiting LIVE window (and
        # REPLAY for every waiting CATCHUP one): LIVE never waits for it.
        above = waiting[0] if klass is CATCHUP else waiting[0] + waiting[1]
        assert cap - sum(after) >= above
    if not admitted and room > 0 and tokens_there:
        if klass is LIVE:
            assert room <= spare  # LIVE waits only for the backfill's unused floor
        elif klass is CATCHUP:
            # The floor is never starved: inside it CATCHUP waits for no one.
            assert backfill >= floor and room <= waiting[0]
        else:
            assert floor - backfill <= waiting[1] and room <= waiting[0] + waiting[1]
    if not admitted and room <= 0:
        assert gate.wake_ms(now_ms) is None  # only an answer frees room


def _play(
    gate: SourceGate,
    action: object,
    args: list[object],
    now_ms: int,
    admit: Callable[[Class, int], object],
) -> int:
    """One step of a `step` strategy's sequence on the gate (`admit(klass, now_ms)` for an
    admit); returns the time after it."""
    if action == "time":
        return now_ms + args[0]  # type: ignore[operator]
    if action == "wait":
        gate.waiting(args[0], args[1])  # type: ignore[arg-type]
    elif action == "answer":
        gate.answered(args[0], args[1])  # type: ignore[arg-type]
    elif action == "share":
        gate.set_share(args[0])  # type: ignore[arg-type]
    elif action == "recover":
        gate.start_recovery(now_ms)
    else:
        admit(args[0], now_ms)  # type: ignore[arg-type]
    return now_ms


def _apply(gate: SourceGate, steps: list[tuple[object, ...]]) -> int:
    """Play `steps` on the gate (admits as they come); returns the time reached."""
    now_ms = T0
    for action, *args in steps:
        now_ms = _play(gate, action, args, now_ms, gate.admit)
    return now_ms


@settings(max_examples=400, deadline=None)
@given(limits, st.lists(step, max_size=80), st.tuples(*[st.integers(0, 12)] * 3), st.randoms())
def test_what_the_gate_says_it_admits_it_admits_in_any_order(
    source: SourceLimits,
    steps: list[tuple[object, ...]],
    asked: tuple[int, int, int],
    rnd: object,
) -> None:
    """`admissible` changes nothing, and the windows it counts (the coordinator wakes that
    many streams of each class) are all admitted, in whatever order they are decided."""
    gate = SourceGate(source, T0)
    now_ms = _apply(gate, steps)
    waiting = gate.waiting_counts
    wanted = (min(asked[0], waiting[0]), min(asked[1], waiting[1]), min(asked[2], waiting[2]))
    bucket = gate.bucket
    before = (gate.in_flight[:], waiting[:], gate.backfill_credit,
              None if bucket is None else (bucket.tokens, bucket.updated_ms))  # fmt: skip
    counts = gate.admissible(wanted, now_ms)
    after = (gate.in_flight[:], gate.waiting_counts[:], gate.backfill_credit,
             None if bucket is None else (bucket.tokens, bucket.updated_ms))  # fmt: skip
    assert after == before
    assert all(0 <= n <= w for n, w in zip(counts, wanted, strict=True))
    order = [klass for klass in (LIVE, CATCHUP, REPLAY) for _ in range(counts[klass])]
    rnd.shuffle(order)  # type: ignore[attr-defined]
    for klass in order:
        assert gate.admit(klass, now_ms), (counts, order)
        gate.waiting(klass, -1)
