"""The coordinator's Prometheus metrics, in a registry of its own (one per Processor).

The Processor calls the hooks below while it handles events; they only add to plain ints (a
prometheus-client call per event cost microseconds), and everything is computed when Prometheus
scrapes, from small in-memory maps the hooks keep up to date, so that a scrape never
reads the table. Counters and histograms:

- ``tidemark_results_total{outcome}``: decoded results by outcome (ack, nack, heartbeat);
- ``tidemark_ignored_total{reason}``: results ignored as ``stale`` or ``duplicate`` (and, rarely,
  ``early``: a replay acked before the live lane passed its window);
- ``tidemark_rejected_total{topic}``: inputs rejected (sent to ``rejected``), by source topic;
- ``tidemark_requeues_total``, ``tidemark_timeouts_total``, ``tidemark_bypasses_total``,
  ``tidemark_tasks_dispatched_total``, ``tidemark_commits_total``;
- ``tidemark_pipeline_tasks_dispatched_total{pipeline}``, ``tidemark_pipeline_results_total{
  pipeline,outcome}`` (a result's worker's; none: ``default``): apart, so the totals' series stay
  as they were; past ``MAX_PIPELINE_LABELS`` names the rest count as ``other`` (bounded labels);
- ``tidemark_stream_errors_total``: events of one stream that raised unexpectedly (isolated: the
  stream is retried later, no other stream is touched);
- ``tidemark_dispatch_delay_seconds{class}``: dispatch time minus due time (``end_ms +
  delay_ms`` for a first attempt, the retry time for a retry), apart for a stream's live window
  (``class="live"``: its end within one window of now, streams.core.admission.classify) and a
  catching-up one (``catchup``), so that a backlog does not read as live latency;
- ``tidemark_ack_to_commit_seconds``: from handling an ack to sending the commit announcing it.

Computed at scrape time, over the streams of the partitions this coordinator owns
(``ProgressCollector``, streams.coordinator.telemetry.progress):

- ``tidemark_windows_in_flight``: windows dispatched and awaiting a result;
- ``tidemark_progress_lag_seconds``: a gauge histogram of ``now - downstream_ms``;
- ``tidemark_progress_lag_top_seconds{stream_id}``: the N streams that lag most (bounded labels);
- ``tidemark_streams_behind{threshold}``: how many streams lag more than the threshold (seconds);
- ``tidemark_streams{state}``: streams by the state ``tidemark streams list`` shows (live,
  catching up, retrying, paused, finished), ``tidemark_streams_late`` (running streams lagging
  more than 2 windows + delay, retrying ones too), and
  ``tidemark_pipeline_windows{pipeline,state}``:
  per pipeline, windows ``ready`` (due, not dispatched) and ``in_flight`` (dispatched,
  unanswered), the backlog workers scale on (``StreamGauges``,
  streams.coordinator.telemetry.streams).

Registered by the Processor: ``tidemark_partitions_owned`` and ``tidemark_partitions_total`` (the
control and results topics' partition count; ``PartitionsCollector``, same module). Registered by
the engines: ``tidemark_build_info{version,engine}`` = 1 (streams.buildinfo).

The outage guard, as this coordinator decided at its last refresh (``OutageCollector``,
streams.coordinator.telemetry.outage, registered by the Processor when it has a guard):

- ``tidemark_sources_in_outage``; per source in outage, ``tidemark_outage_failing_streams`` and
  ``tidemark_outage_streams`` (over every coordinator), ``tidemark_streams_held`` (this
  coordinator's streams with a held window) and ``tidemark_outage_hold_seconds`` (how long the
  source's bypasses have been held, since this coordinator saw it go into outage);
  ``tidemark_outage_max_hold_seconds``: the longest a hold lasts (TIDEMARK_OUTAGE_MAX_HOLD_MS).
Admission's gauges per source (``tidemark_source_*``): streams.coordinator.telemetry.admission.

The confluent engine's clients (``RenewalCollector``, streams.coordinator.confluent.renewal):

- ``tidemark_client_renewals_total{reason}``: its Kafka clients renewed in process, by what made
  them fail (``abort_failed``, ``fenced``, ``fatal``, ``stuck_call``, ``stalled_consumer``,
  ``abort_streak``, ``error``).

Read from the cluster every few seconds by a background thread (``ConsumerLagCollector``,
streams.coordinator.telemetry.lag, registered by the engines):

- ``tidemark_consumer_lag{group,topic,partition}``: high watermark - committed offset, for the
  coordinators' group and the workers' groups (``streams.kafka.lag``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, Metric

from streams.clock import now_ms
from streams.coordinator.telemetry.progress import DispatchDelay, Histogram, ProgressCollector
from streams.coordinator.telemetry.streams import StreamGauges, TrackedStreams
from streams.core import Commit, Decision, Result, StreamState
from streams.core.config import DEFAULT_PIPELINE

log = logging.getLogger("streams.coordinator")

OUTCOMES: Final = ("ack", "nack", "heartbeat")
IGNORED: Final = ("stale", "duplicate")
TOP_LAGGARDS: Final = 20
BEHIND_THRESHOLD_S: Final = 300
DISPATCH_BUCKETS: Final = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
ACK_TO_COMMIT_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# Pipelines with a series of their own; more are counted as "other" (a bounded label).
MAX_PIPELINE_LABELS: Final = 100
OTHER_PIPELINES: Final = "other"
# Acks of one stream waiting for their commit; more only happens with partial acks piling up,
# and dropping the oldest then only loses samples.
MAX_PENDING_ACKS = 1000


class CoordinatorMetrics:
    """The coordinator's metrics and the hooks that feed them (see the module docstring).

    The hooks run on every event, so they only add to plain ints and lists; ``EventCollector``
    turns those into Prometheus families when the registry is scraped.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        top_laggards: int = TOP_LAGGARDS,
        behind_threshold_s: float = BEHIND_THRESHOLD_S,
        clock_ms: Callable[[], int] = now_ms,
    ) -> None:
        self.registry = CollectorRegistry() if registry is None else registry
        self.results: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
        self.ignored_total: dict[str, int] = dict.fromkeys(IGNORED, 0)
        self.rejected_total: dict[str, int] = {}
        self.requeues = 0
        self.timeouts = 0
        self.bypasses = 0
        self.expired = 0  # listed windows unlisted by bypass retention
        self.collected = 0  # finished or deleted streams whose state was collected
        self.tasks = 0
        self.tasks_by_pipeline: dict[str, int] = {}
        self.results_by_pipeline: dict[tuple[str, str], int] = {}
        self.commits = 0
        self.stream_errors = 0
        self.dispatch_delay = DispatchDelay(DISPATCH_BUCKETS)
        self.ack_to_commit = Histogram(ACK_TO_COMMIT_BUCKETS)
        self._acks: dict[str, list[tuple[int, int]]] = {}  # stream -> [(ack_ms, handled_ms)]
        self.tracked = TrackedStreams()  # each owned stream, for the gauges computed at scrape
        self.registry.register(EventCollector(self))
        self.registry.register(
            ProgressCollector(self.tracked, top_laggards, behind_threshold_s, clock_ms)
        )
        self.registry.register(StreamGauges(self.tracked, clock_ms))

    # -- hooks, called by the Processor ---------------------------------------------------

    def result(self, outcome: str, pipeline: str | None = None) -> None:
        """A result decoded; `pipeline` is its worker's (None: the default pipeline's)."""
        self.results[outcome] += 1  # the wire contract admits only these outcomes
        counts = self.results_by_pipeline
        key = (pipeline or DEFAULT_PIPELINE, outcome)
        count = counts.get(key)  # a label seen before: the usual case, one lookup
        if count is None:
            key = (self._pipeline_label(key[0]), outcome)
            count = counts.get(key, 0)
        counts[key] = count + 1

    def _dispatched(self, pipeline: str, count: int) -> None:
        counts = self.tasks_by_pipeline
        if pipeline in counts:  # a label seen before: the usual case
            counts[pipeline] += count
        else:
            label = self._pipeline_label(pipeline)
            counts[label] += count

    def _pipeline_label(self, pipeline: str) -> str:
        """The label a pipeline counts under: its name, or OTHER_PIPELINES past
        MAX_PIPELINE_LABELS names (one set of names for both families)."""
        known = self.tasks_by_pipeline
        if pipeline in known or len(known) < MAX_PIPELINE_LABELS:
            known.setdefault(pipeline, 0)
            return pipeline
        known.setdefault(OTHER_PIPELINES, 0)
        return OTHER_PIPELINES

    def ignored(self, reason: str) -> None:
        self.ignored_total[reason] = self.ignored_total.get(reason, 0) + 1

    def rejected(self, topic: str) -> None:
        self.rejected_total[topic] = self.rejected_total.get(topic, 0) + 1

    def stream_error(self) -> None:
        self.stream_errors += 1

    def bypasses_expired(self, count: int) -> None:
        """Listed windows tombstoned on `bypassed` by retention (no longer replayable)."""
        self.expired += count

    def collected_stream(self) -> None:
        self.collected += 1

    def replayed(self, tasks: int, commits: int, pipeline: str = DEFAULT_PIPELINE) -> None:
        """Tasks (of `pipeline`) and commits sent by the replay lane."""
        self.tasks += tasks
        self.commits += commits
        if tasks:
            self._dispatched(pipeline, tasks)

    def accepted(self, stream_id: str, result: Result, now_ms: int) -> None:
        """A result about to be applied: an ack starts its ack-to-commit clock."""
        ack_ms = result.ack_ms
        if result.outcome != "ack" or ack_ms is None:
            return
        pending = self._acks.get(stream_id)
        if pending is None:  # the usual case: no other ack of the stream waits
            self._acks[stream_id] = [(ack_ms, now_ms)]
            return
        pending.append((ack_ms, now_ms))
        if len(pending) > MAX_PENDING_ACKS:
            del pending[0]

    def applied(self, partition: int, stream_id: str, decision: Decision) -> None:
        """A decision about to be emitted and saved: count it and track the stream."""
        state = decision.state
        if state is None:
            self.forget(stream_id)
            return
        if decision.timeouts or decision.requeues or decision.bypasses:
            self.timeouts += decision.timeouts
            self.requeues += decision.requeues
            self.bypasses += len(decision.bypasses)
        tasks = decision.tasks
        if tasks:
            self.tasks += len(tasks)
            self._dispatched(state.config.pipeline, len(tasks))
            config = state.config
            observe = self.dispatch_delay.observe
            if len(tasks) == 1:
                (task,) = tasks
                for window in state.windows:  # a dispatched window still holds its due time
                    if window.start_ms == task.start_ms:
                        observe(config, window.end_ms, window.due_ms, task.dispatched_ms)
                        break
            else:
                dispatched = {task.start_ms: task.dispatched_ms for task in tasks}
                for window in state.windows:
                    at_ms = dispatched.get(window.start_ms)
                    if at_ms is not None:
                        observe(config, window.end_ms, window.due_ms, at_ms)
        self.tracked.note(partition, state)
        if state.finished_ms is not None or state.deleted_ms is not None:
            self._acks.pop(stream_id, None)  # ended: no commit to wait for

    def committed(self, commit: Commit) -> None:
        self.commits += 1
        stream_id = commit.stream_id
        pending = self._acks.get(stream_id)
        if not pending:
            return
        downstream_ms, committed_ms = commit.downstream_ms, commit.committed_ms
        histogram = self.ack_to_commit
        if len(pending) == 1:  # the usual case: one ack per commit
            ack_ms, handled_ms = pending[0]
            if ack_ms <= downstream_ms:
                waited_ms = committed_ms - handled_ms
                histogram.observe(waited_ms / 1000 if waited_ms > 0 else 0)
                del self._acks[stream_id]
            return
        kept = []
        for ack_ms, handled_ms in pending:
            if ack_ms <= downstream_ms:
                histogram.observe(max(0, committed_ms - handled_ms) / 1000)
            else:
                kept.append((ack_ms, handled_ms))
        if kept:
            self._acks[stream_id] = kept
        else:
            del self._acks[stream_id]

    def track(self, partition: int, state: StreamState) -> None:
        """Remember the stream's progress, state and windows (a rebuild's decoded record)."""
        self.tracked.note(partition, state)

    def track_progress(
        self, partition: int, stream_id: str, downstream_ms: int, in_flight: int
    ) -> None:
        """`track` from what a rebuild reads of a running stream (its stored summary)."""
        self.tracked.note_progress(partition, stream_id, downstream_ms, in_flight)

    def forget(self, stream_id: str) -> None:
        self.tracked.forget(stream_id)
        self._acks.pop(stream_id, None)

    def drop_partition(self, partition: int) -> None:
        """The partition went to another coordinator: its streams are no longer ours to report."""
        for stream_id in self.tracked.drop_partition(partition):
            self._acks.pop(stream_id, None)


class EventCollector:
    """Serves the event counters and histograms from the plain values the hooks keep."""

    def __init__(self, metrics: CoordinatorMetrics) -> None:
        self._metrics = metrics
        self._created_s = time.time()

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        m, created = self._metrics, self._created_s
        results = CounterMetricFamily(
            "tidemark_results", "Results decoded, by outcome.", labels=["outcome"]
        )
        for outcome, count in list(m.results.items()):
            results.add_metric([outcome], count, created=created)
        ignored = CounterMetricFamily(
            "tidemark_ignored", "Results ignored, by reason.", labels=["reason"]
        )
        for reason, count in list(m.ignored_total.items()):
            ignored.add_metric([reason], count, created=created)
        rejected = CounterMetricFamily(
            "tidemark_rejected", "Inputs rejected, by source topic.", labels=["topic"]
        )
        for topic, count in list(m.rejected_total.items()):
            rejected.add_metric([topic], count, created=created)
        by_pipeline = CounterMetricFamily(
            "tidemark_pipeline_results",
            "Results decoded, by the pipeline of their worker and outcome.",
            labels=["pipeline", "outcome"],
        )
        for (pipeline, outcome), count in list(m.results_by_pipeline.items()):
            by_pipeline.add_metric([pipeline, outcome], count, created=created)
        dispatched = CounterMetricFamily(
            "tidemark_pipeline_tasks_dispatched",
            "Tasks sent to workers, by pipeline.",
            labels=["pipeline"],
        )
        for pipeline, count in list(m.tasks_by_pipeline.items()):
            dispatched.add_metric([pipeline], count, created=created)
        families: list[Metric] = [results, ignored, rejected, by_pipeline, dispatched]
        for name, documentation, count in (
            ("tidemark_requeues", "Failures scheduled for a retry.", m.requeues),
            ("tidemark_timeouts", "Attempts whose deadline passed.", m.timeouts),
            ("tidemark_bypasses", "Windows given up (bypassed).", m.bypasses),
            (
                "tidemark_bypasses_expired",
                "Bypassed windows unlisted after bypass_retention_ms (no longer replayable).",
                m.expired,
            ),
            (
                "tidemark_streams_collected",
                "Finished or deleted streams whose state was collected after gc_grace_ms.",
                m.collected,
            ),
            ("tidemark_tasks_dispatched", "Tasks sent to workers.", m.tasks),
            ("tidemark_commits", "Commits sent, re-announced too.", m.commits),
            (
                "tidemark_stream_errors",
                "Events of one stream that failed unexpectedly (isolated, retried later).",
                m.stream_errors,
            ),
        ):
            family = CounterMetricFamily(name, documentation)
            family.add_metric([], count, created=created)
            families.append(family)
        families.append(m.dispatch_delay.family())
        families.append(
            m.ack_to_commit.family(
                "tidemark_ack_to_commit_seconds",
                "From handling an ack to sending the commit that announces its window.",
            )
        )
        return families
