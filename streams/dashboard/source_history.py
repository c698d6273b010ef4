"""The Sources view's last hour: per source, dispatches per second and failing streams, sampled
from the `health` entries the status page reads at each refresh. Pure: entries and time in.

**Dispatches.** Each entry carries, per source, `dispatched`: a counter of the tasks its owner
dispatched in that partition since it took the partition. At every refresh the counters are
compared with the last ones seen, per (source, partition): the increase is what was dispatched
since. A counter that drops, or a partition whose owner changed, started again at 0 (a restart,
a move), so its whole value is new: a rate is never negative. A counter that restarted and grew
past its old value within one refresh (about a second) while its owner kept its name reads as
the difference, an undercount of that second only. The counters seen at the first refresh are
the baseline (the page does not know since when they count); a (source, partition) that appears
later counts from 0. Stale entries count too: their counters stop moving, and a move shows as
the new owner's entry.

**Samples.** The increases add up until `sample_ms` (10 s) has passed since the last sample;
the sample is then their sum over the time since, per second, with the failing streams of the
fresh entries at that moment. A source's first sample has no rate (None: nothing to compare
with). At most `window_ms / sample_ms` (360) samples are kept per source, none older than
`window_ms` (an hour), and only for the sources the caller tracks (a bounded set: the view's).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from streams.wire import HealthMessage

SAMPLE_MS = 10_000
WINDOW_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class Sample:
    at_ms: int
    dispatches_per_s: float | None  # None: the source's first sample (no rate yet)
    failing: int


class SourceHistory:
    """The last `window_ms` of each tracked source, one sample per `sample_ms` at most."""

    def __init__(self, sample_ms: int = SAMPLE_MS, window_ms: int = WINDOW_MS) -> None:
        if sample_ms <= 0 or window_ms < sample_ms:
            raise ValueError("need 0 < sample_ms <= window_ms")
        self.sample_ms = sample_ms
        self.window_ms = window_ms
        self.capacity = window_ms // sample_ms
        self._counters: dict[tuple[str, int], tuple[str, int]] = {}  # -> (owner, dispatched)
        self._primed = False  # the first refresh's counters are a baseline
        self._pending: dict[str, int] = {}  # dispatches since the last sample, per source
        self._samples: dict[str, deque[Sample]] = {}
        self.sampled_ms: int | None = None

    def observe(
        self,
        entries: Iterable[HealthMessage],
        failing: Mapping[str, int],
        now_ms: int,
        sampled: Collection[str],
        kept: Collection[str],
    ) -> bool:
        """One refresh: every entry read (stale ones too), the failing streams per source over
        the fresh ones, the sources to sample (those the topics show now) and the sources whose
        history to keep (`sampled` and those still on the page: every other one is dropped).
        Whether it took a sample."""
        self._count(entries, sampled)
        last = self.sampled_ms
        if last is not None and now_ms < last:  # the clock went back: sample from now on
            self.sampled_ms = now_ms
            return False
        if last is not None and now_ms - last < self.sample_ms:
            return False
        for source in sampled:
            dispatched = self._pending.get(source, 0)
            rate = None
            if last is not None and source in self._samples:
                rate = round(dispatched * 1000 / (now_ms - last), 3)
            samples = self._samples.setdefault(source, deque(maxlen=self.capacity))
            samples.append(Sample(now_ms, rate, failing.get(source, 0)))
        self._pending.clear()
        self.sampled_ms = now_ms
        self._forget(kept, now_ms)
        return True

    def samples(self, source: str) -> tuple[Sample, ...]:
        """The source's samples, oldest first (none for an untracked source)."""
        return tuple(self._samples.get(source, ()))

    def sources(self) -> list[str]:
        """The sources with samples."""
        return sorted(self._samples)

    def _count(self, entries: Iterable[HealthMessage], sampled: Collection[str]) -> None:
        seen: dict[tuple[str, int], tuple[str, int]] = {}
        for entry in entries:
            for source, counts in entry.sources.items():
                key = (source, entry.partition)
                seen[key] = (entry.owner, counts.dispatched)
                if not self._primed or source not in sampled:
                    continue
                before = self._counters.get(key)
                if before is None or before[0] != entry.owner or counts.dispatched < before[1]:
                    added = counts.dispatched  # new, moved or restarted: counted from 0
                else:
                    added = counts.dispatched - before[1]
                if added:
                    self._pending[source] = self._pending.get(source, 0) + added
        self._counters = seen  # partitions gone from the topic are forgotten
        self._primed = True

    def _forget(self, kept: Collection[str], now_ms: int) -> None:
        oldest = now_ms - self.window_ms
        for source in list(self._samples):
            samples = self._samples[source]
            while samples and samples[0].at_ms <= oldest:
                samples.popleft()
            if not samples or source not in kept:
                del self._samples[source]
