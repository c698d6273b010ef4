"""A token bucket on a source's dispatches: at most `burst` at once, `rate_per_s` on average.

The bucket holds up to `burst` tokens and gains `rate_per_s` of them per second, pro rata of the
milliseconds that passed (`now_ms` is an argument; nothing here reads a clock). Each dispatch
takes one token; without one the window waits, and `next_token_ms` says when the next token
will be there (the coordinator's wake). So over any interval of T ms a bucket grants at most
`burst + rate_per_s * T / 1000` dispatches (up to float rounding, far below a token).

A clock that goes backwards (`now_ms < updated_ms`, e.g. a host's clock stepped back) refills
nothing and never raises: the bucket keeps `updated_ms`, so the interval it already credited is
not credited twice when the clock comes forward again.

This is the local token bucket of Envoy's rate limiting (a bucket of `max_tokens` refilled by
`tokens_per_fill` every `fill_interval`), refilled continuously instead of by ticks, so that a
wake time is exact to the millisecond.
"""

from __future__ import annotations

import math


class TokenBucket:
    """A small mutable object: `tokens` (a float in [0, burst]) as of `updated_ms`."""

    __slots__ = ("_per_ms", "burst", "rate_per_s", "tokens", "updated_ms")

    def __init__(self, rate_per_s: float, burst: int, now_ms: int) -> None:
        """A full bucket: a source starts with its burst available (as after a long idle)."""
        if not rate_per_s > 0 or burst < 1:
            raise ValueError("a token bucket needs rate_per_s > 0 and burst >= 1")
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._per_ms = rate_per_s / 1000.0
        self.tokens = float(burst)
        self.updated_ms = now_ms

    def _refill(self, now_ms: int) -> None:
        elapsed_ms = now_ms - self.updated_ms
        if elapsed_ms > 0:  # a clock going backwards refills nothing
            tokens = self.tokens + elapsed_ms * self._per_ms
            self.tokens = tokens if tokens < self.burst else float(self.burst)
            self.updated_ms = now_ms

    def take(self, now_ms: int) -> bool:
        """Refill for the time that passed, then take one token if there is one."""
        self._refill(now_ms)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False

    def available(self, now_ms: int) -> bool:
        """Whether `take(now_ms)` would succeed (refills, takes nothing)."""
        self._refill(now_ms)
        return self.tokens >= 1.0

    def next_token_ms(self, now_ms: int) -> int:
        """When `take` will next succeed if nothing else takes a token first: `now_ms` when a
        token is there already, else the first millisecond at which one will be."""
        self._refill(now_ms)
        if self.tokens >= 1.0:
            return now_ms
        start_ms = self.updated_ms  # >= now_ms only when the clock went backwards
        at_ms = start_ms + math.ceil((1.0 - self.tokens) / self._per_ms)
        # The division rounds either way: step on until the refill really reaches a token, and
        # back while the millisecond before reaches it too (ceil of 1832.0000000001 gave 1833
        # where 1832 already made a token: a wake a millisecond late). The test is the one
        # `take` makes, so the wake is exactly its first success.
        while self.tokens + (at_ms - start_ms) * self._per_ms < 1.0:
            at_ms += 1
        while at_ms - 1 > start_ms and self.tokens + (at_ms - 1 - start_ms) * self._per_ms >= 1.0:
            at_ms -= 1
        return max(at_ms, now_ms)
