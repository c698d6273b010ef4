"""The worker's backpressure: take no more than `limit` (concurrency + buffer) tasks at once.

A pause costs about a second: librdkafka drops what it had prefetched, and fetches
again only at its next fetch decision after the resume (bench/worker_bench.py: 159
results/s paused at every full buffer, against 683 never paused, for 800 that 16
threads of 20 ms tasks allow). So while full, the loop first stops polling and waits
for a handler (`holding`), which keeps the prefetch; only a buffer full for
`PAUSE_AFTER_MS` (long tasks) pauses every partition, which also lets the loop poll
again, to serve rebalances. Paused, it resumes once half the buffer has drained, so
that one resume fetches many tasks.

A rule over a count and a monotonic clock, so that it is tested without a source: the runtime
asks `step` once a turn and pauses or resumes every partition when told.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

# How long a full buffer holds the poll before every partition is paused.
PAUSE_AFTER_MS = 1000

Step: TypeAlias = Literal["pause", "resume", None]


class Backpressure:
    def __init__(self, limit: int, buffer: int) -> None:
        self.limit = limit
        # Paused, resume once the taken tasks are this many below the limit (half the buffer).
        self.resume_below = limit - max(1, (buffer + 1) // 2)
        self.paused = False
        self.holding = False  # full for a moment: the loop waits for a handler, not the poll
        self._full_since_ms: int | None = None

    def step(self, taken: int, monotonic_ms: int) -> Step:
        """What to do with `taken` tasks taken and unfinished at `monotonic_ms`."""
        if self.paused:
            if taken <= self.resume_below:
                self.paused = False
                return "resume"
            return None
        if taken < self.limit:
            self._full_since_ms = None
            self.holding = False
            return None
        if self._full_since_ms is None:
            self._full_since_ms = monotonic_ms
        if monotonic_ms - self._full_since_ms < PAUSE_AFTER_MS:
            self.holding = True
            return None
        self.holding = False
        self._full_since_ms = None
        self.paused = True
        return "pause"

    def stopped(self) -> None:
        """The runtime paused every partition for good (shutdown): nothing is resumed."""
        self.paused = True
        self.holding = False
        self.resume_below = -1
