"""The outage guard's share of the chaos audit: no bypass while a shared source is down.

The run's `source-*` streams share one source, down (every task nacked) from their creation to
`outage_until_ms`, far longer than their `bypass_after_ms`; coordinators are killed during it,
one losing its data folder, each kept down past TIDEMARK_HEALTH_STALE_MS. The guard holds their
windows' bypasses (streams.core.outage) for at most `outage_max_hold_ms` from the start of a
window's hold, which starts no earlier than `first_failed_ms + bypass_after_ms`. So a window of
theirs bypassed before the source came back must have spent at least `bypass_after_ms +
max_hold_ms` since its first failure; anything sooner is a bypass the guard let through.

It also measures the recovery: the tasks per second the source's streams were sent in the
seconds after it came back, against the rate during the outage (issue 25, defect 8).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .auditor import Audit, StreamPlan

RECOVERY_S = 10  # the stretch after the source came back over which the release is counted


@dataclass
class Recovery:
    source: str
    streams: int = 0
    held_bypasses: int = 0  # bypassed during the outage after the longest hold (allowed)
    outage_rate: float = 0.0  # tasks per second sent to the source's streams in its outage
    peak_rate: int = 0  # the most tasks sent in one second after it came back
    released: int = 0  # tasks sent in the RECOVERY_S seconds after it came back
    per_second: list[int] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"source {self.source} ({self.streams} streams): {self.held_bypasses} bypasses after "
            f"the longest hold; at recovery {self.released} tasks in {RECOVERY_S} s, at most "
            f"{self.peak_rate} in one second (per second: {self.per_second}), against "
            f"{self.outage_rate:.1f}/s during the outage"
        )


class OutageAudit:
    def __init__(self, plans: dict[str, StreamPlan], max_hold_ms: int) -> None:
        self.max_hold_ms = max_hold_ms
        # stream -> (source, created_ms, outage_until_ms, bypass_after_ms) of its one incarnation
        self.down: dict[str, tuple[str, int, int, int]] = {}
        for sid, plan in plans.items():
            inc = plan.incarnations[0]
            if inc.source is not None and inc.outage_until_ms is not None:
                until = inc.outage_until_ms
                self.down[sid] = (inc.source, inc.created_ms, until, inc.bypass_after_ms)

    def check(
        self, bypassed: dict[str, list[Any]], tasks: list[dict[str, Any]], audit: Audit
    ) -> list[Recovery]:
        recoveries: dict[str, Recovery] = {}
        for source, _, _, _ in self.down.values():
            recoveries.setdefault(source, Recovery(source)).streams += 1
        for key, records in bypassed.items():
            for r in records:
                if r is None or r["stream_id"] not in self.down:
                    continue
                source, _, until_ms, budget_ms = self.down[r["stream_id"]]
                if r["bypassed_ms"] >= until_ms:
                    continue  # the source was back
                spent = r["bypassed_ms"] - r["first_failed_ms"]
                if spent >= budget_ms + self.max_hold_ms:
                    recoveries[source].held_bypasses += 1
                    continue
                audit.fail(
                    f"bypassed {key}: bypassed while source {source} was down (until "
                    f"{until_ms}), {spent} ms after its first failure: less than its budget "
                    f"{budget_ms} ms and outage_max_hold_ms {self.max_hold_ms}: {r}"
                )
        self._rates(tasks, recoveries)
        return sorted(recoveries.values(), key=lambda r: r.source)

    def _rates(self, tasks: list[dict[str, Any]], recoveries: dict[str, Recovery]) -> None:
        after: dict[str, Counter[int]] = defaultdict(Counter)
        during: Counter[str] = Counter()
        spans: dict[str, tuple[int, int]] = {}
        for source, created_ms, until_ms, _ in self.down.values():
            start, end = spans.get(source, (created_ms, until_ms))
            spans[source] = (min(start, created_ms), max(end, until_ms))
        for task in tasks:
            if task["stream_id"] not in self.down:
                continue
            source, created_ms, until_ms, _ = self.down[task["stream_id"]]
            at = task["dispatched_ms"]
            if created_ms <= at < until_ms:
                during[source] += 1
            elif until_ms <= at < until_ms + RECOVERY_S * 1000:
                after[source][(at - until_ms) // 1000] += 1
        for source, rec in recoveries.items():
            start, end = spans[source]
            rec.outage_rate = during[source] / max(1.0, (end - start) / 1000)
            rec.per_second = [after[source][s] for s in range(RECOVERY_S)]
            rec.released = sum(rec.per_second)
            rec.peak_rate = max(rec.per_second, default=0)
