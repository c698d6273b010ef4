"""Paced recovery: after an outage (or a restart with a backlog), a source's held windows go out
by a slow start instead of all at once.

A `Pacer` per source and coordinator holds `level`, the concurrency it allows (a float; the
gate uses `floor(level)`), the way TCP holds its congestion window:

| event              | rule                                                                 |
|--------------------|----------------------------------------------------------------------|
| `start(now_ms)`    | a recovery: level = min(pace_start, cap), threshold = cap (or no     |
|                    | threshold without a cap); active, unless the level already covers    |
|                    | the cap (or, without one, the backlog it was given)                  |
| `success(demand)`  | level < threshold: level += 1 (slow start: a round of `level`        |
|                    | answers doubles it); else level += 1 / level (congestion avoidance:  |
|                    | +1 per round). Then the recovery may end (below)                     |
| `failure()`        | threshold = level / 2, level = max(1, level / 2) (multiplicative cut)|
| end of a recovery  | with a cap: once level >= cap (the cap then bounds the source alone);|
|                    | without one: once level >= demand, this coordinator's in flight plus |
|                    | waiting windows of the source, and >= the backlog `start` was given  |
|                    | (its held windows): the pace then holds nothing back, and without a  |
|                    | cap there is no other level at which to stop                         |
| `limit()`          | floor(level) while active, None when not pacing                      |

The defaults, and why: `pace_start` 4 (streams.core.admission.limits: a handful of tasks to
learn whether the source answers, doubling to 1000 in eight rounds); the threshold starts at
the cap so that the doubling runs until the cap or a failure, as TCP's initial ssthresh is "as
high as possible"; a failure halves, so that a source that falls again sees its load halve at
each failure. Every failure cuts, not one per round as TCP does: a source that just came back
and fails again is better asked too little than too much, and if it is down again the outage
guard (streams.core.outage) holds its windows anyway. A failure or success outside a recovery
changes nothing: pacing is for the release of a backlog, the cap and bucket govern the steady
state. A source without limits is paced the same, from `DEFAULT_PACE_START`.

Pure: counts in, a number out; time is an argument (`started_ms`, for metrics only).
"""

from __future__ import annotations

import math

from streams.core.admission.limits import DEFAULT_PACE_START


class Pacer:
    """The paced concurrency of one source on this coordinator (see the module's table)."""

    __slots__ = ("active", "backlog", "cap", "level", "pace_start", "started_ms", "threshold")

    def __init__(self, cap: int | None = None, pace_start: int = DEFAULT_PACE_START) -> None:
        """`cap`: the concurrency this coordinator may reach (its share of the source's
        max_in_flight; None: no cap). The gate updates `cap` when the share changes."""
        if pace_start < 1:
            raise ValueError("pace_start must be at least 1")
        self.cap = cap
        self.pace_start = pace_start
        self.level = float(pace_start)
        self.threshold = math.inf
        self.active = False
        self.started_ms: int | None = None
        self.backlog = 0

    def start(self, now_ms: int, backlog: int = 0) -> None:
        """A recovery begins (the source left outage, or the coordinator restarted with a
        backlog): from `pace_start`, doubling up to the cap. `backlog`: the windows known to be
        released (the held streams): without a cap the recovery lasts until the level covers
        them too, not only what is in flight or waiting at the moment (the held windows are
        not waiting yet when the first answers come)."""
        self.backlog = backlog
        cap = self.cap
        self.level = float(self.pace_start if cap is None else max(1, min(self.pace_start, cap)))
        self.threshold = math.inf if cap is None else float(cap)
        self.active = True
        self.started_ms = now_ms
        if (self.level >= cap) if cap is not None else (self.level >= backlog):
            self._end()  # nothing to pace: the start already covers it

    def success(self, demand: int) -> None:
        """An answer that is not a failure; `demand`: this coordinator's in flight plus waiting
        windows of the source, after the answer (when the source has no cap, the recovery ends
        once the level covers it)."""
        if not self.active:
            return
        level = self.level
        self.level = level + 1.0 if level < self.threshold else level + 1.0 / level
        self.settle(demand)

    def failure(self) -> None:
        """A failed answer (a nack or a timeout): halve, down to 1."""
        if not self.active:
            return
        self.threshold = self.level / 2.0
        self.level = max(1.0, self.level / 2.0)

    def settle(self, demand: int) -> None:
        """End the recovery if the level reached the cap (or, without a cap, the demand)."""
        if not self.active:
            return
        cap = self.cap
        wanted = demand if demand > self.backlog else self.backlog
        if (self.level >= cap) if cap is not None else (self.level >= wanted):
            self._end()

    def limit(self) -> int | None:
        """The concurrency allowed while a recovery is under way; None when not pacing."""
        return int(self.level) if self.active else None

    def _end(self) -> None:
        self.active = False
        self.started_ms = None
