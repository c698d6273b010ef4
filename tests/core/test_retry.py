import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.core import Exponential, Fixed, Immediate, retry_delay_ms
from streams.core.retry import RETRY_AFTER_ERROR_MS, jitter_fraction, retry_after_error_ms


def test_immediate_retries_at_once() -> None:
    assert [retry_delay_ms(Immediate(), "s", 0, n) for n in (1, 2, 50)] == [0, 0, 0]


def test_fixed_waits_the_interval_every_time() -> None:
    assert [retry_delay_ms(Fixed(60_000), "s", 0, n) for n in (1, 2, 50)] == [60_000] * 3


def test_exponential_grows_by_the_multiplier_up_to_max_ms() -> None:
    policy = Exponential(initial_ms=1_000, multiplier=2.0, max_ms=10_000)
    delays = [retry_delay_ms(policy, "s", 0, n) for n in range(1, 7)]
    assert delays == [1_000, 2_000, 4_000, 8_000, 10_000, 10_000]


def test_exponential_with_multiplier_one_is_constant() -> None:
    policy = Exponential(initial_ms=750, multiplier=1, max_ms=10_000)
    assert {retry_delay_ms(policy, "s", 0, n) for n in range(1, 20)} == {750}


def test_exponential_survives_huge_attempt_numbers() -> None:
    policy = Exponential(initial_ms=1_000, multiplier=10.0, max_ms=3_600_000)
    assert retry_delay_ms(policy, "s", 0, 10_000) == 3_600_000


def test_exponential_fractional_growth_is_floored_to_whole_ms() -> None:
    policy = Exponential(initial_ms=1_000, multiplier=1.5, max_ms=100_000)
    assert [retry_delay_ms(policy, "s", 0, n) for n in (1, 2, 3)] == [1_000, 1_500, 2_250]


@pytest.mark.parametrize("jitter", [0.1, 0.5, 1.0])
def test_jitter_stays_within_bounds(jitter: float) -> None:
    policy = Exponential(initial_ms=1_000, multiplier=2.0, max_ms=64_000, jitter=jitter)
    for attempt in range(1, 10):
        full = min(64_000, 1_000 * 2 ** (attempt - 1))
        for start_ms in range(0, 3_000_000, 60_000):
            delay = retry_delay_ms(policy, "cluster-a", start_ms, attempt)
            assert full * (1 - jitter) <= delay <= full


def test_jitter_is_deterministic_and_spread() -> None:
    policy = Exponential(initial_ms=10_000, multiplier=2.0, max_ms=10_000, jitter=0.5)
    first = [retry_delay_ms(policy, "cluster-a", start, 1) for start in range(0, 6_000_000, 60_000)]
    again = [retry_delay_ms(policy, "cluster-a", start, 1) for start in range(0, 6_000_000, 60_000)]
    assert first == again
    assert len(set(first)) > 50  # different windows get different delays
    other = [retry_delay_ms(policy, "cluster-b", start, 1) for start in range(0, 6_000_000, 60_000)]
    assert other != first


def test_jitter_fraction_is_uniform_enough_in_unit_interval() -> None:
    fractions = [jitter_fraction("s", start, 1) for start in range(10_000)]
    assert all(0.0 <= u < 1.0 for u in fractions)
    assert 0.45 < sum(fractions) / len(fractions) < 0.55
    assert jitter_fraction("s", 0, 1) != jitter_fraction("s", 0, 2)


def test_zero_jitter_is_the_plain_delay() -> None:
    policy = Exponential(initial_ms=1_000, multiplier=3.0, max_ms=100_000, jitter=0.0)
    assert retry_delay_ms(policy, "s", 123, 3) == 9_000


def test_a_stream_whose_tick_raised_is_tried_again_a_fixed_while_later() -> None:
    assert RETRY_AFTER_ERROR_MS == 5_000
    assert retry_after_error_ms(1_795_946_400_000) == 1_795_946_400_000 + RETRY_AFTER_ERROR_MS


@given(st.integers(0, 2**53 - 1 - RETRY_AFTER_ERROR_MS))
def test_a_retry_after_an_error_is_always_ahead(now_ms: int) -> None:
    assert retry_after_error_ms(now_ms) - now_ms == RETRY_AFTER_ERROR_MS > 0
