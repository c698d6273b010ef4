"""Streams by state and each pipeline's windows ready and in flight, and the partitions this
coordinator owns: computed when Prometheus scrapes, O(streams), no table reads.

`StreamGauges` keeps one small tuple per owned stream, replaced by the metrics' hooks after each
decision (streams.coordinator.telemetry.metrics): its pipeline, the state that time does not
change (streams.core.view.fixed_status, the rule the published view and so `streams list`
follow), what tells live from catching up (streams.core.view.status_at, at scrape time), the due
times of its windows not dispatched yet, and its windows in flight. A window counts as ready
once its due time has passed (waiting for admission included); a paused stream has none ready.
`tidemark_streams_late` counts the running streams (live, catching up or retrying) whose progress
lag exceeds their freshness objective, the lag past which `streams list` says catching up
(streams.core.view.behind_ms: two windows and the delay), retrying ones included: the bad
events of the freshness SLO in deploy/prometheus/rules.yml.
The replay lane's tasks are not counted here (at most `replay_concurrency` per coordinator).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

from prometheus_client.core import GaugeMetricFamily, Metric

from streams.clock import now_ms
from streams.core import StreamState
from streams.core.view import STATUSES, Status, behind_ms, fixed_status, status_at


class _Entry(NamedTuple):
    partition: int
    pipeline: str
    fixed: Status | None  # None: live or catching up, by its lag at scrape time
    announced_ms: int
    window_ms: int
    delay_ms: int
    due_ms: tuple[int, ...]  # windows not dispatched (none while paused)
    in_flight: int


class StreamGauges:
    """`tidemark_streams{state}`, `tidemark_streams_late` and
    `tidemark_pipeline_windows{pipeline,state}`; a collector.

    Streams a rebuild indexed from their stored summaries alone (past the record cache, 100,000
    streams a coordinator) count from their next decision on.
    """

    def __init__(self, clock_ms: Callable[[], int] = now_ms) -> None:
        self._clock_ms = clock_ms
        self._entries: dict[str, _Entry] = {}

    def note(self, partition: int, state: StreamState) -> None:
        """The stream's state after a decision or a rebuild; a deleted one is forgotten."""
        config = state.config
        if state.deleted_ms is not None:
            self._entries.pop(config.stream_id, None)
            return
        due: list[int] = []
        in_flight = 0
        for window in state.windows:
            if window.in_flight:
                in_flight += 1
            elif not window.finished and not state.paused:
                due.append(window.due_ms)
        self._entries[config.stream_id] = _Entry(
            partition,
            config.pipeline,
            fixed_status(state),
            state.announced_ms,
            config.window_ms,
            config.delay_ms,
            tuple(due),
            in_flight,
        )

    def forget(self, stream_id: str) -> None:
        self._entries.pop(stream_id, None)

    def drop_partition(self, partition: int) -> None:
        for stream_id in [s for s, e in self._entries.items() if e.partition == partition]:
            del self._entries[stream_id]

    def describe(self) -> Iterable[Metric]:
        return list(self._families())

    def collect(self) -> Iterable[Metric]:
        now = self._clock_ms()
        states = dict.fromkeys(STATUSES, 0)
        late = 0
        ready: dict[str, int] = {}
        in_flight: dict[str, int] = {}
        for entry in list(self._entries.values()):  # one C call: a snapshot under the GIL
            status = entry.fixed
            if status is None:
                status = status_at("live", entry.announced_ms, entry.window_ms, entry.delay_ms, now)
            elif status != "retrying":
                states[status] += 1  # paused or finished: not late, whatever their lag
                continue
            states[status] += 1
            if now - entry.announced_ms > behind_ms(entry.window_ms, entry.delay_ms):
                late += 1
            pipeline = entry.pipeline
            ready[pipeline] = ready.get(pipeline, 0) + sum(1 for d in entry.due_ms if d <= now)
            in_flight[pipeline] = in_flight.get(pipeline, 0) + entry.in_flight
        by_state, late_streams, windows = self._families()
        for status, count in states.items():
            by_state.add_metric([status], count)
        late_streams.add_metric([], late)
        for pipeline in sorted(ready):
            windows.add_metric([pipeline, "ready"], ready[pipeline])
            windows.add_metric([pipeline, "in_flight"], in_flight[pipeline])
        return [by_state, late_streams, windows]

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                "tidemark_streams",
                "Owned streams by state, as `tidemark streams list` shows them.",
                labels=["state"],
            ),
            GaugeMetricFamily(
                "tidemark_streams_late",
                "Running owned streams (live, catching up, retrying) lagging more than their "
                "freshness objective: 2 windows + delay.",
            ),
            GaugeMetricFamily(
                "tidemark_pipeline_windows",
                "Owned streams' windows per pipeline: ready (due, not dispatched) and in_flight "
                "(dispatched, unanswered).",
                labels=["pipeline", "state"],
            ),
        )


class PartitionsCollector:
    """`tidemark_partitions_owned` and `tidemark_partitions_total` (the inputs topics'
    partition count), so that a rule compares their sum over coordinators with the total."""

    def __init__(self, owned: Callable[[], int], total: int) -> None:
        self._owned = owned
        self._total = total

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        owned = GaugeMetricFamily(
            "tidemark_partitions_owned", "Partitions of control and results this coordinator owns."
        )
        owned.add_metric([], self._owned())
        total = GaugeMetricFamily(
            "tidemark_partitions_total", "Partitions of the control and results topics."
        )
        total.add_metric([], self._total)
        return [owned, total]
