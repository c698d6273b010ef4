"""``InProcessWorker``: the real worker runtime over the in-memory fakes, driven by a test.

No broker, no thread, no sleep: the test sets the clocks, turns the loop, runs the handler
calls (``executor.run_all()``) and confirms the sends (``sink.confirm()``), or lets ``work()``
do all three. What it checks is what the worker really does: results, commits, heartbeats,
shutdown nacks, rebalances, for a sync handler or an ``async`` one alike.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from streams.handler import AnyHandler, Task
from streams.kafka.member import Partition
from streams.testing.fakes import TASKS, HeldExecutor, InMemoryResultSink, InMemoryTaskSource
from streams.testing.tasks import DEFAULT_END_MS
from streams.worker.config import WorkerConfig
from streams.worker.ports import CoroutineExecutor, HandlerExecutor
from streams.worker.runtime import WorkerRuntime

__all__ = ["TASKS", "InProcessWorker"]


class InProcessWorker:
    """A ``WorkerRuntime`` over the three fakes, at clocks the test sets: ``now_ms`` (wall;
    by default ``DEFAULT_END_MS``, when ``make_task``'s default window has just ended) and
    ``mono_ms`` (monotonic; while None, it reads as ``now_ms``: the two clocks agree).

    ``config`` are ``WorkerConfig`` fields (``concurrency``, ``buffer``, ``max_task_s``...);
    ``grace_s`` is 0 unless given. ``executor`` replaces the held one, for both kinds of
    handler (a real ``HandlerPool`` or ``LoopExecutor``, say).
    """

    def __init__(
        self,
        handler: AnyHandler,
        now_ms: int = DEFAULT_END_MS,
        commit_interval_s: float = 0.0,
        *,
        pipeline: str = "test",
        executor: Any = None,
        **config: Any,
    ) -> None:
        self.now_ms = now_ms
        self.mono_ms: int | None = None
        self.source = InMemoryTaskSource()
        self.sink = InMemoryResultSink()
        self.executor = HeldExecutor() if executor is None else executor
        self.registry = CollectorRegistry()
        self.config = WorkerConfig(pipeline, **{"grace_s": 0.0, **config})
        threads: HandlerExecutor = self.executor
        coroutines: CoroutineExecutor = self.executor
        self.runtime = WorkerRuntime(
            handler,
            self.config,
            self.source,
            self.sink,
            executor=threads,
            coroutine_executor=coroutines,
            registry=self.registry,
            now_ms=lambda: self.now_ms,
            monotonic_ms=lambda: self.now_ms if self.mono_ms is None else self.mono_ms,
            commit_interval_s=commit_interval_s,
        )
        self.runtime.open()

    def give(self, *tasks: Task, partition: Partition = (TASKS, 0)) -> list[int]:
        """Assign ``partition`` (if it is not yet), add the tasks to it and turn the loop until
        they are taken; return their offsets. Their handler calls wait for ``work()``."""
        if partition not in self.source.positions:
            self.source.assign(partition)
        offsets = [self.source.add_task(task, partition) for task in tasks]
        self.turns(len(tasks) + 2)
        return offsets

    def turns(self, count: int = 3) -> None:
        """Turn the loop ``count`` times; handler calls and sends wait."""
        for _ in range(count):
            self.runtime.turn()

    def work(self, count: int = 3) -> None:
        """Turns in which every handler call runs and every send is confirmed."""
        for _ in range(count):
            self.runtime.turn()
            self.executor.run_all()
            self.sink.confirm()

    def stop(self) -> None:
        """Stop as on SIGTERM: nack what did not start or outran the grace, flush, commit."""
        self.runtime.stop()
        self.runtime.shutdown()

    def results(self, outcome: str | None = None) -> list[dict[str, Any]]:
        """The ``results`` values sent, as JSON, of one ``outcome`` (ack, nack, heartbeat)."""
        return self.sink.values(outcome)

    @property
    def committed(self) -> dict[Partition, int]:
        """The committed next-offset of each partition."""
        return dict(self.source.committed)

    def count(self, outcome: str) -> float:
        """The worker's ``tidemark_worker_tasks_total`` for ``outcome``."""
        labels = {"pipeline": self.config.pipeline, "outcome": outcome}
        return self.registry.get_sample_value("tidemark_worker_tasks_total", labels) or 0.0
