"""A source's limits: how much of it Tidemark's coordinators may use at once, and how fast.

| field            | type           | bound                        | default                      |
|------------------|----------------|------------------------------|------------------------------|
| `source`         | str            | 1 to 200 characters          | required (as StreamConfig's) |
| `max_in_flight`  | int or null    | 1 to 1_000_000               | null: no cap on concurrency  |
| `rate_per_s`     | number or null | above 0, at most 1_000_000   | null: no token bucket        |
| `burst`          | int or null    | at least 1, only with a rate | max(1, ceil(rate_per_s))     |
| `backfill_share` | number         | 0 <= x < 1                   | 0.2                          |
| `pace_start`     | int            | 1 to 1_000_000               | 4 (a paced recovery's start) |

`max_in_flight` counts tasks dispatched and not yet answered, across every stream of the source
and every coordinator (streams.core.admission.share splits it between coordinators).
`backfill_share` is the part of the cap that catching-up and replay windows keep while live
windows wait (streams.core.admission.gate). `pace_start` is the concurrency a recovery starts at
(streams.core.admission.pacing); a source without limits is still paced when it recovers.

`SourceLimits.unlimited(source)` (every field at its default) behaves exactly as Tidemark did
before limits existed, apart from that paced recovery. A bad field raises InvalidInput naming it,
as streams.core.config does for a stream's config.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec.structs import force_setattr

from streams.core._checks import MAX_SAFE_INT, check_float, check_int, check_str
from streams.core.config import MAX_SOURCE_CHARS
from streams.errors import InvalidInput

# A cap beyond a million concurrent tasks of one source protects nothing; the bound keeps the
# numbers the gate and the allocation add up small and exact.
MAX_SOURCE_IN_FLIGHT = 1_000_000
MAX_RATE_PER_S = 1_000_000.0
DEFAULT_BACKFILL_SHARE = 0.2
# Four tasks at once: a source that just recovered answers a handful before it is asked for
# more, and slow start doubles that each round of answers (8, 16, 32...), so even a cap of
# 1000 is reached in eight rounds.
DEFAULT_PACE_START = 4

FIELDS = ("source", "max_in_flight", "rate_per_s", "burst", "backfill_share", "pace_start")


class SourceLimits(msgspec.Struct, frozen=True, gc=False):
    """One source's limits (see the module's table); checked at construction, so that no
    invalid one exists. `burst` is resolved to its default when a rate is given without one."""

    source: str
    max_in_flight: int | None = None
    rate_per_s: float | None = None
    burst: int | None = None
    backfill_share: float = DEFAULT_BACKFILL_SHARE
    pace_start: int = DEFAULT_PACE_START

    def __post_init__(self) -> None:
        source = check_str("source", self.source)
        if not source or len(source) > MAX_SOURCE_CHARS:
            raise InvalidInput("source", f"must be 1 to {MAX_SOURCE_CHARS} characters")
        if self.max_in_flight is not None:
            check_int("max_in_flight", self.max_in_flight, 1, MAX_SOURCE_IN_FLIGHT)
        if self.rate_per_s is not None:
            rate = check_float("rate_per_s", self.rate_per_s, 0.0, MAX_RATE_PER_S)
            if rate <= 0:
                raise InvalidInput("rate_per_s", "must be above 0 (null: no rate limit)")
            force_setattr(self, "rate_per_s", rate)
            if self.burst is None:
                force_setattr(self, "burst", max(1, math.ceil(rate)))
            else:
                check_int("burst", self.burst, 1, MAX_SAFE_INT)
        elif self.burst is not None:
            raise InvalidInput("burst", "is only allowed with rate_per_s (a bucket's size)")
        share = check_float("backfill_share", self.backfill_share, 0.0, 1.0)
        if share >= 1:
            raise InvalidInput("backfill_share", "must be below 1 (live windows keep the rest)")
        force_setattr(self, "backfill_share", share)
        check_int("pace_start", self.pace_start, 1, MAX_SOURCE_IN_FLIGHT)

    @classmethod
    def unlimited(cls, source: str) -> SourceLimits:
        """No cap and no rate: the source behaves as before limits existed (but for the paced
        recovery, with the default `pace_start`)."""
        return cls(source)

    @property
    def is_unlimited(self) -> bool:
        """Neither a cap nor a rate: the gate admits everything while no recovery is paced."""
        return self.max_in_flight is None and self.rate_per_s is None


def limits_from_dict(d: Any) -> SourceLimits:
    """Build limits from their JSON object; absent fields take defaults, an unknown one, a
    wrong type or a value out of range raises InvalidInput naming the field and why."""
    if not isinstance(d, Mapping):
        raise InvalidInput("limits", f"must be an object, got {type(d).__name__}")
    for name in d:
        if name not in FIELDS:
            raise InvalidInput(str(name), f"is not a field of a source's limits ({FIELDS})")
    if "source" not in d:
        raise InvalidInput("source", "is required")
    return SourceLimits(**{name: d[name] for name in FIELDS if name in d})


def limits_to_dict(limits: SourceLimits) -> dict[str, Any]:
    """The JSON object of `limits` (every field, `burst` resolved); `limits_from_dict` inverts
    it."""
    return {name: getattr(limits, name) for name in FIELDS}
