"""The worker's Prometheus metrics, registered once per registry.

- ``tidemark_worker_tasks_total{pipeline,outcome}``: tasks taken off ``tasks``, by what became
  of them: ``ack``, ``nack``, ``shutdown`` (nacked because the worker stopped), ``expired``
  (skipped, deadline passed) and ``invalid`` (undecodable, skipped).
- ``tidemark_worker_task_duration_seconds{pipeline,outcome}``: handler run time, for tasks
  whose handler ran (``ack``, ``nack``, ``shutdown``).
- ``tidemark_worker_in_flight{pipeline}``: tasks taken and not finished yet: waiting to start,
  running, or with a result not yet delivered. Backpressure keeps it at most
  ``concurrency + buffer``.
- ``tidemark_build_info{version}``: 1, with the installed release (streams.buildinfo).
"""

from __future__ import annotations

import functools
from typing import Final

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from streams.buildinfo import version

OUTCOMES: Final = ("ack", "nack", "shutdown", "expired", "invalid")
TIMED_OUTCOMES: Final = ("ack", "nack", "shutdown")  # those whose handler ran
DURATION_BUCKETS: Final = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class WorkerMetrics:
    """The worker metrics in one registry. Use ``for_registry`` for the default one."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.tasks = Counter(
            "tidemark_worker_tasks",
            "Tasks taken off the tasks topic, by outcome.",
            ["pipeline", "outcome"],
            registry=registry,
        )
        self.duration = Histogram(
            "tidemark_worker_task_duration_seconds",
            "How long handlers ran, by outcome.",
            ["pipeline", "outcome"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.in_flight = Gauge(
            "tidemark_worker_in_flight",
            "Tasks taken and not finished: waiting, running, or with a result being delivered.",
            ["pipeline"],
            registry=registry,
        )
        self.build_info = Gauge(
            "tidemark_build_info", "The running release: always 1.", ["version"], registry=registry
        )
        self.build_info.labels(version=version()).set(1)

    def of(self, pipeline: str) -> PipelineMetrics:
        """The children of ``pipeline``'s series."""
        return PipelineMetrics(self, pipeline)

    @staticmethod
    def for_registry(registry: CollectorRegistry | None) -> WorkerMetrics:
        """Metrics in ``registry``; the process-wide default one is shared by every runtime."""
        return _default() if registry is None or registry is REGISTRY else WorkerMetrics(registry)


class PipelineMetrics:
    """One pipeline's children of the worker metrics, made once: ``labels()`` per task cost
    7 µs a call (cProfile), twice per task."""

    def __init__(self, metrics: WorkerMetrics, pipeline: str) -> None:
        self.in_flight = metrics.in_flight.labels(pipeline=pipeline)
        self.counted = {o: metrics.tasks.labels(pipeline=pipeline, outcome=o) for o in OUTCOMES}
        self.timed = {
            o: metrics.duration.labels(pipeline=pipeline, outcome=o) for o in TIMED_OUTCOMES
        }
        self._in_flight_now = -1.0

    def set_in_flight(self, count: int) -> None:
        """Set the in-flight gauge, which the loop reads every turn, when it moves."""
        if count != self._in_flight_now:
            self.in_flight.set(count)
            self._in_flight_now = count


@functools.cache
def _default() -> WorkerMetrics:
    # prometheus_client refuses a second registration of a name, so the default set is made once.
    return WorkerMetrics(REGISTRY)
