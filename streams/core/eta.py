"""When a stream that is catching up will be live again: a reader's estimate, from its views.

A stream's progress (`downstream_ms`) moves at some rate, in progress milliseconds per wall
millisecond; the wall clock moves too, so a stream behind gains on it at `rate - 1`, and is
live again once its lag is down to `behind_ms` (two windows and its delay, core/view.py). The
rate is read from two of the stream's published views: the newest and one `SPAN_MS` or so
before it, so that a window that took long, or a burst of commits, moves the estimate little.

Only what a reader sees is used (the views' `changed_ms` and `downstream_ms`), so the CLI and
the status page estimate alike, whatever coordinator owns the stream. Pure: times are given.

`Pace` is what a reader keeps per stream while it is behind: three samples, O(1) memory.
"""

from __future__ import annotations

import math
from typing import NamedTuple

# The rate is measured over at least MIN_SPAN_MS of views (fewer: no estimate yet), and over
# SPAN_MS to twice that once the stream has been behind that long.
SPAN_MS = 300_000
MIN_SPAN_MS = 10_000


class Sample(NamedTuple):
    at_ms: int  # when the view was made (its changed_ms)
    downstream_ms: int


class Pace(NamedTuple):
    """A stream's samples: `anchor` the oldest kept, `middle` the one that becomes the anchor
    once `SPAN_MS` newer than it has been seen, `latest` its newest view."""

    anchor: Sample
    middle: Sample
    latest: Sample


def observe(pace: Pace | None, at_ms: int, downstream_ms: int) -> Pace:
    """`pace` with one more view of the stream (a view older than the latest starts afresh:
    the stream went back, or a reader read its topic again)."""
    sample = Sample(at_ms, downstream_ms)
    if pace is None or at_ms < pace.latest.at_ms or downstream_ms < pace.latest.downstream_ms:
        return Pace(sample, sample, sample)
    if at_ms - pace.middle.at_ms >= SPAN_MS:
        return Pace(pace.middle, sample, sample)
    return Pace(pace.anchor, pace.middle, sample)


def rate(pace: Pace) -> float | None:
    """Progress milliseconds per wall millisecond over the kept samples; None when they span
    less than `MIN_SPAN_MS`."""
    span_ms = pace.latest.at_ms - pace.anchor.at_ms
    if span_ms < MIN_SPAN_MS:
        return None
    return (pace.latest.downstream_ms - pace.anchor.downstream_ms) / span_ms


def live_at_ms(changed_ms: int, behind_after_ms: int, progress_rate: float) -> int | None:
    """When a stream whose view made at `changed_ms` turns catching up at `behind_after_ms`
    (its downstream plus two windows and its delay) is live again, progressing at
    `progress_rate`; None if it does not gain on the clock."""
    if progress_rate <= 1.0:
        return None
    to_gain_ms = changed_ms - behind_after_ms
    if to_gain_ms <= 0:
        return changed_ms
    return changed_ms + math.ceil(to_gain_ms / (progress_rate - 1.0))
