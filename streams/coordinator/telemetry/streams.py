"""What the coordinator's gauges know of each owned stream (`TrackedStreams`: one tuple a stream,
made from its latest state, which the metrics' hooks park after each decision), and the gauges
computed from it when Prometheus scrapes, O(streams), no table reads: streams by state and each
pipeline's windows ready and in flight (`StreamGauges`), and the partitions this coordinator owns.

A stream's tuple holds its partition, its pipeline, the state that time does not change
(streams.core.view.fixed_status, the rule the published view and so `streams list` follow),
when it starts to be late (streams.core.view.late_after_ms: what tells live from catching up at
scrape time), the due times of its windows not dispatched yet, its windows in flight, and its
progress (`downstream_ms`; None once finished) for the progress collector
(streams.coordinator.telemetry.progress). One tuple in one map, rather than a map per
collector: at a million streams, three maps and their objects held 276 bytes a stream, the one
tuple 195 (`bench/tracked_bench.py`, 2026-12-05).

A window counts as ready once its due time has passed (waiting for admission included); a
paused stream has none ready. `tidemark_streams_late` counts the running streams (live, catching
up or retrying) whose progress lag exceeds their freshness objective, the lag past which `streams
list` says catching up (streams.core.view.behind_ms: two windows and the delay), retrying ones
included: the bad events of the freshness SLO in deploy/prometheus/rules.yml.
The replay lane's tasks are not counted here (at most `replay_concurrency` per coordinator).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from streams.clock import now_ms
from streams.core import StreamState
from streams.core.view import STATUSES, Status, fixed_status, late_after_ms

# (partition, pipeline (None: known from a stored summary alone, not in the gauges of state and
# windows until its next decision), fixed status (None: live or catching up, by the time),
# late after (ms), due times of the windows not dispatched (None, one int, or a tuple; none
# while paused), windows in flight, downstream_ms (None: finished, no progress lag)).
_Record = tuple[int, str | None, Status | None, int, int | tuple[int, ...] | None, int, int | None]


class TrackedStreams:
    """The owned streams' records (see the module docstring), written by the metrics' hooks on
    the Processor's thread and read whole by the collectors on a scrape's.

    A decision only parks the stream's state (`note`: one dict write under a lock); the record
    is made from the latest parked state when a collector reads (`records`, `downstreams`,
    `windows_in_flight`), or when `PENDING_MAX` streams are parked. A stream decided many times
    between two scrapes (a catching-up stream is decided once a result) costs one record, not
    one a decision: with the pipeline labels' fast path, 169.4k -> 165.5k instructions a result
    catching up and 306.0k -> 297.6k live (bench/processor_bench.py under callgrind). The bound
    keeps the states parked, which may have left the record cache, to a few MB.
    """

    PENDING_MAX = 8192

    def __init__(self) -> None:
        self._records: dict[str, _Record] = {}
        self._in_flight = 0  # over the running streams
        self._pending: dict[str, tuple[int, StreamState]] = {}  # parked by `note`
        self._lock = threading.Lock()  # `_pending` and `_records` between the two threads

    def note(self, partition: int, state: StreamState) -> None:
        """The stream's state after a decision or a rebuild; a deleted one is forgotten."""
        if state.deleted_ms is not None:
            self.forget(state.config.stream_id)
            return
        with self._lock:  # `_settle` on a scrape's thread replaces the map: read it under the lock
            pending = self._pending
            pending[state.config.stream_id] = (partition, state)
            if len(pending) >= self.PENDING_MAX:
                self._settle()

    def _settle(self) -> None:
        """Make the parked states' records (the caller holds the lock)."""
        pending = self._pending
        if pending:
            self._pending = {}
            for stream_id, (partition, state) in pending.items():
                self._put(stream_id, _record(partition, state))

    def note_progress(
        self, partition: int, stream_id: str, downstream_ms: int, in_flight: int
    ) -> None:
        """A running stream's progress and windows in flight, from its stored summary (a
        rebuild past the record cache): what else the record held is kept."""
        with self._lock:
            parked = self._pending.pop(stream_id, None)
            if parked is not None:
                self._put(stream_id, _record(*parked))
            old = self._records.get(stream_id)
            if old is None:
                self._put(stream_id, (partition, None, None, 0, None, in_flight, downstream_ms))
            else:
                _, pipeline, fixed, late_ms, due, _, _ = old
                self._put(
                    stream_id, (partition, pipeline, fixed, late_ms, due, in_flight, downstream_ms)
                )

    def _put(self, stream_id: str, record: _Record) -> None:
        old = self._records.get(stream_id)
        if old is not None and old[6] is not None:
            self._in_flight -= old[5]
        if record[6] is not None:
            self._in_flight += record[5]
        self._records[stream_id] = record

    def forget(self, stream_id: str) -> None:
        with self._lock:
            self._pending.pop(stream_id, None)
            old = self._records.pop(stream_id, None)
            if old is not None and old[6] is not None:
                self._in_flight -= old[5]

    def drop_partition(self, partition: int) -> list[str]:
        """Forget the partition's streams; their ids."""
        with self._lock:
            self._settle()
            dropped = [s for s, record in self._records.items() if record[0] == partition]
        for stream_id in dropped:
            self.forget(stream_id)
        return dropped

    def records(self) -> list[_Record]:
        """Every record: a snapshot, safe to iterate on another thread."""
        with self._lock:
            self._settle()
            return list(self._records.values())

    # -- what the progress collector reads (streams.coordinator.telemetry.progress.Tracked) --

    @property
    def windows_in_flight(self) -> int:
        with self._lock:
            self._settle()
            return self._in_flight

    def downstreams(self) -> list[tuple[str, int]]:
        """(stream_id, downstream_ms) of every running stream: a snapshot."""
        with self._lock:
            self._settle()
            items = list(self._records.items())
        return [(stream_id, record[6]) for stream_id, record in items if record[6] is not None]


def _record(partition: int, state: StreamState) -> _Record:
    """A running stream's record (see the module docstring)."""
    config = state.config
    windows = state.windows
    due: int | tuple[int, ...] | None
    if len(windows) == 1:  # the usual case: a live stream's one window
        (window,) = windows
        in_flight = 1 if window.in_flight else 0
        due = None if in_flight or window.finished or state.paused else window.due_ms
    else:
        in_flight = sum(1 for w in windows if w.in_flight)
        waiting = () if state.paused else tuple(
            w.due_ms for w in windows if not w.in_flight and not w.finished
        )  # fmt: skip
        due = waiting or None
    return (
        partition,
        config.pipeline,
        fixed_status(state),
        late_after_ms(state.announced_ms, config.window_ms, config.delay_ms),
        due,
        in_flight,
        None if state.finished_ms is not None else state.downstream_ms,
    )


class StreamGauges:
    """`tidemark_streams{state}`, `tidemark_streams_late` and
    `tidemark_pipeline_windows{pipeline,state}`; a collector over `TrackedStreams`.

    Streams a rebuild indexed from their stored summaries alone (past the record cache, 100,000
    streams a coordinator) count from their next decision on.
    """

    def __init__(self, tracked: TrackedStreams, clock_ms: Callable[[], int] = now_ms) -> None:
        self._tracked = tracked
        self._clock_ms = clock_ms

    def describe(self) -> Iterable[Metric]:
        return list(self._families())

    def collect(self) -> Iterable[Metric]:
        now = self._clock_ms()
        states = dict.fromkeys(STATUSES, 0)
        late = 0
        ready: dict[str, int] = {}
        in_flight: dict[str, int] = {}
        for _, pipeline, fixed, late_ms, due, flying, _ in self._tracked.records():
            if pipeline is None:
                continue
            if fixed is None:
                behind = now > late_ms
                states["catching up" if behind else "live"] += 1
                late += behind
            else:
                states[fixed] += 1
                if fixed == "retrying" and now > late_ms:
                    late += 1
            if pipeline not in ready:
                ready[pipeline] = in_flight[pipeline] = 0
            if isinstance(due, int):
                if due <= now:
                    ready[pipeline] += 1
            elif due is not None:
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
