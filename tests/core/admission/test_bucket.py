"""The token bucket: the documented examples, and its bound over any interval (property)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.admission import TokenBucket

T0 = 1_795_946_400_000
# Float rounding of the refill, far below a token.
EPSILON = 1e-6


def test_a_full_bucket_grants_its_burst_then_one_per_interval() -> None:
    bucket = TokenBucket(rate_per_s=4, burst=2, now_ms=T0)
    assert [bucket.take(T0) for _ in range(3)] == [True, True, False]
    assert bucket.next_token_ms(T0) == T0 + 250
    assert not bucket.take(T0 + 249)
    assert bucket.take(T0 + 250)
    assert bucket.next_token_ms(T0 + 250) == T0 + 500


def test_an_idle_bucket_refills_up_to_its_burst_only() -> None:
    bucket = TokenBucket(rate_per_s=10, burst=3, now_ms=T0)
    for _ in range(3):
        assert bucket.take(T0)
    assert [bucket.take(T0 + 3_600_000) for _ in range(4)] == [True, True, True, False]


def test_a_clock_going_backwards_refills_nothing_and_never_raises() -> None:
    bucket = TokenBucket(rate_per_s=1, burst=1, now_ms=T0)
    assert bucket.take(T0)
    assert not bucket.take(T0 - 10_000)
    assert bucket.next_token_ms(T0 - 10_000) == T0 + 1000  # counted from where it was
    assert not bucket.take(T0 + 999)
    assert bucket.take(T0 + 1000)
    assert not bucket.take(T0 + 1000)


def test_a_slow_rate_wakes_at_the_first_millisecond_with_a_token() -> None:
    bucket = TokenBucket(rate_per_s=0.3, burst=1, now_ms=T0)
    assert bucket.take(T0)
    wake = bucket.next_token_ms(T0 + 5)
    assert wake == T0 + 3334  # 1000 / 0.3 = 3333.33 ms
    assert not bucket.available(wake - 1) and bucket.take(wake)


steps = st.lists(
    st.tuples(st.integers(-2_000, 5_000), st.integers(1, 5)),  # (ms to move, takes)
    min_size=1,
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(st.floats(0.05, 2_000), st.integers(1, 20), steps)
def test_over_any_interval_dispatches_stay_within_burst_plus_rate(
    rate_per_s: float, burst: int, moves: list[tuple[int, int]]
) -> None:
    bucket = TokenBucket(rate_per_s, burst, T0)
    now_ms = T0
    granted: list[int] = []  # the (forward) time of each granted take
    latest_ms = T0
    for move_ms, takes in moves:
        now_ms += move_ms
        latest_ms = max(latest_ms, now_ms)
        wake = bucket.next_token_ms(now_ms)
        assert wake >= now_ms
        for _ in range(takes):
            if bucket.take(now_ms):
                # A backwards clock refills nothing: credit the grant to the latest time seen.
                granted.append(latest_ms)
        if wake == now_ms:
            assert granted and granted[-1] == latest_ms  # a token was there: the take had it
        assert 0.0 <= bucket.tokens <= burst
    for i in range(len(granted)):
        for j in range(i, len(granted)):
            interval_ms = granted[j] - granted[i]
            assert j - i + 1 <= burst + rate_per_s * interval_ms / 1000 + EPSILON


@settings(max_examples=200, deadline=None)
@given(st.floats(0.05, 2_000), st.integers(1, 20), st.integers(0, 40), st.integers(0, 10_000))
def test_next_token_ms_is_exactly_when_a_take_succeeds(
    rate_per_s: float, burst: int, drained: int, later_ms: int
) -> None:
    bucket = TokenBucket(rate_per_s, burst, T0)
    for _ in range(drained):
        bucket.take(T0)
    now_ms = T0 + later_ms
    wake = bucket.next_token_ms(now_ms)
    if wake > now_ms:
        probe = TokenBucket(rate_per_s, burst, T0)
        probe.tokens, probe.updated_ms = bucket.tokens, bucket.updated_ms
        assert not probe.take(wake - 1)
    assert bucket.take(wake)
