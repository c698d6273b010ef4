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

from prometheus_client.core import GaugeMetricFamily, Metric

from streams.clock import now_ms
from streams.core import StreamState
from streams.core.view import STATUSES, Status, behind_ms, fixed_status, status_at

# (partition, pipeline, fixed status (None: live or catching up, by its lag at scrape time),
# announced_ms, window_ms, delay_ms, due times of the windows not dispatched (none while paused),
# windows in flight): a plain tuple, made after every decision.
_Entry = tuple[int, str, Status | None, int, int, int, tuple[int, ...], int]
_NONE: tuple[int, ...] = ()


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
        windows = state.windows
        if len(windows) == 1:  # the usual case: a live stream's one window
            (window,) = windows
            in_flight = 1 if window.in_flight else 0
            due = _NONE if in_flight or window.finished or state.paused else (window.due_ms,)
        else:
            in_flight = sum(1 for w in windows if w.in_flight)
            due = (
                _NONE
                if state.paused
                else tuple(w.due_ms for w in windows if not w.in_flight and not w.finished)
            )
        self._entries[config.stream_id] = (
            partition,
            config.pipeline,
            fixed_status(state),
            state.announced_ms,
            config.window_ms,
            config.delay_ms,
            due,
            in_flight,
        )

    def forget(self, stream_id: str) -> None:
        self._entries.pop(stream_id, None)

    def drop_partition(self, partition: int) -> None:
        for stream_id in [s for s, e in self._entries.items() if e[0] == partition]:
            del self._entries[stream_id]

    def describe(self) -> Iterable[Metric]:
        return list(self._families())

    def collect(self) -> Iterable[Metric]:
        now = self._clock_ms()
        states = dict.fromkeys(STATUSES, 0)
        late = 0
        ready: dict[str, int] = {}
        in_flight: dict[str, int] = {}
        entries = list(self._entries.values())  # one C call: a snapshot under the GIL
        for _, pipeline, fixed, announced_ms, window_ms, delay_ms, due, flying in entries:
            if fixed is None:
                status = status_at("live", announced_ms, window_ms, delay_ms, now)
                states[status] += 1
                late += status == "catching up"
            else:
                states[fixed] += 1
                if fixed == "retrying" and now - announced_ms > behind_ms(window_ms, delay_ms):
                    late += 1
            if pipeline not in ready:
                ready[pipeline] = in_flight[pipeline] = 0
            if due:
                ready[pipeline] += sum(1 for d in due if d <= now)
            in_flight[pipeline] += flying
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
