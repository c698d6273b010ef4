"""The outage guard: when a shared source is down, hold its streams' time-based bypasses.

A stream names its `source` in its config (streams without one share none). A stream is
**failing** while one of its windows has failed and is not yet closed, unless it is paused.
A source is **in outage** when, over every partition and coordinator, at least
`outage_min_streams` of its streams are failing and they make at least `outage_ratio` of them.
While it is, each of its streams is decided with `max_hold_ms = outage_max_hold_ms` (else 0),
so that a window whose retry budget (`bypass_after_ms`, from `first_failed_ms`) runs out keeps
retrying instead of being bypassed (streams.core.hold), for at most `outage_max_hold_ms` from
the failure that started its hold. Non-retryable kinds and `max_attempts` bypass as before.
When the source recovers, `release` sends every held window out again at once; one that then
acks carries `held_ms` in its commit. A failure of an attempt sent before the recovery is the
outage's, not the window's next one (`held_in_flight_before`).

Pure: the counts come from the caller (streams.coordinator), time is an argument.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from streams.core._checks import MAX_DURATION_MS, MAX_SAFE_INT, check_float, check_int
from streams.core.gate import Gate
from streams.core.lifecycle import advance
from streams.core.model import Decision, StreamState
from streams.errors import InvalidInput

DEFAULT_OUTAGE_RATIO = 0.5
DEFAULT_OUTAGE_MIN_STREAMS = 3
DEFAULT_OUTAGE_MAX_HOLD_MS = 6 * 3_600_000


@dataclass(frozen=True, slots=True)
class OutagePolicy:
    """The guard's settings; a bad one raises InvalidInput naming `outage_<field>`."""

    ratio: float = DEFAULT_OUTAGE_RATIO
    min_streams: int = DEFAULT_OUTAGE_MIN_STREAMS
    max_hold_ms: int = DEFAULT_OUTAGE_MAX_HOLD_MS

    def __post_init__(self) -> None:
        ratio = check_float("outage_ratio", self.ratio, 0.0, 1.0)
        if ratio <= 0:
            raise InvalidInput("outage_ratio", "must be above 0 (a share of a source's streams)")
        object.__setattr__(self, "ratio", ratio)
        check_int("outage_min_streams", self.min_streams, 1, MAX_SAFE_INT)
        check_int("outage_max_hold_ms", self.max_hold_ms, 0, MAX_DURATION_MS)

    def hold_ms(self, outage: bool) -> int:
        """The `max_hold_ms` to decide a stream with: the hold while its source is in outage."""
        return self.max_hold_ms if outage else 0


class SourceCounts(NamedTuple):
    """How many of a source's streams are failing, of how many (summed over partitions)."""

    failing: int
    total: int


def in_outage(counts: SourceCounts, policy: OutagePolicy) -> bool:
    """Whether a source with these counts is in outage under `policy`."""
    failing = counts.failing
    return failing >= policy.min_streams and failing >= policy.ratio * counts.total


def sources_in_outage(counts: Mapping[str, SourceCounts], policy: OutagePolicy) -> frozenset[str]:
    """The sources of `counts` that are in outage."""
    return frozenset(source for source, c in counts.items() if in_outage(c, policy))


def is_failing(state: StreamState) -> bool:
    """Whether one of the stream's windows has failed and is not closed yet, while the stream
    is not paused: a paused stream tries nothing, so an old failure of it says nothing about
    its source now (it would keep the source in outage for as long as it stays paused)."""
    if state.paused:
        return False
    for w in state.windows:  # noqa: SIM110 (a loop, not any(): this runs at every encode)
        if w.first_failed_ms is not None and not w.finished:
            return True
    return False


def hold_started_ms(state: StreamState) -> int | None:
    """When the stream's oldest open hold started (None: no window of it is held)."""
    earliest: int | None = None
    for w in state.windows:  # a loop, not a list: this runs at every encode of a record
        at_ms = w.held_since_ms
        if at_ms is not None and not w.finished and (earliest is None or at_ms < earliest):
            earliest = at_ms
    return earliest


def held_in_flight_before(state: StreamState, at_ms: int) -> bool:
    """Whether a held window of the stream is in flight with an attempt dispatched before
    `at_ms` (when its source recovered): that attempt's failure is one of the outage's, so it
    is decided as held; only a failure of an attempt sent after the recovery is the "next
    failure" that bypasses a released window."""
    for w in state.windows:  # a loop, not any(): no list at every decision
        sent_ms = w.dispatched_ms
        if w.held_since_ms is not None and w.in_flight and sent_ms is not None and sent_ms < at_ms:
            return True
    return False


def release(state: StreamState, now_ms: int, gate: Gate | None = None) -> Decision:
    """The source recovered: every held window waiting for its retry is dispatched at once, as
    far as `gate` admits it (streams.core.gate: a denied one is due and waits, and is asked
    again at every later decision).

    A held window's time budget is spent, so its next failure bypasses it (unless its source is
    in outage again); its next ack commits with `held_ms`. A paused stream dispatches nothing
    (its held windows go out when it resumes). Deadlines are left to the next `advance`.
    """
    if type(now_ms) is not int:
        return Decision(state, rejected="now_ms must be an integer")
    for window in state.windows:
        if window.held_since_ms is not None and not window.in_flight and not window.finished:
            window.due_ms = min(window.due_ms, now_ms)
    return advance(state, now_ms, expire=False, gate=gate)
