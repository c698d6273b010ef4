"""The worker's schedule: which taken tasks wait, which run, and when each one heartbeats.

Pure and single-threaded (the runtime's loop thread owns it); time is an argument, two clocks:
``now_ms``, the wall clock that task times (``end_ms``, ``deadline_ms``) are compared with, and
``mono_ms``, a monotonic clock for intervals inside the process (heartbeats, how long a handler
has run), which a step of the wall clock does not move. A job moves

    waiting (arrived before its end_ms) -> ready -> running -> answered -> delivered

and leaves the board when delivered, or when it expires before it starts, or when its
partition is revoked before it starts (``dropped``). A task whose ``deadline_ms`` has passed
when it arrives, or before it could start, is expired: the coordinator has already timed it
out, so running it would only waste a thread.

Every turn of the worker's loop asks the board what is due (``start_due``, ``heartbeats_due``,
``long_running``), so each answer costs what is due, not what is on the board: deadlines,
heartbeats and start times are kept in order (heaps and a queue, their stale entries dropped as
they surface, and rebuilt when they outgrow the board). Scanning every job instead made each
turn cost in proportion to the jobs taken (1,500 with 500 coroutines and their buffer).
"""

from __future__ import annotations

import heapq
import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Literal

from streams.handler import Task
from streams.kafka.member import Partition
from streams.worker.offsets import OffsetToken

State = Literal["waiting", "ready", "running", "answered", "delivered", "dropped"]
log = logging.getLogger("streams.worker")
MIN_HEARTBEAT_MS: Final = 100
# A task still running this long after it started is reported (``long_running``): a line per
# task started would cost a busy worker a third of its CPU, and a quick task's outcome is in
# the metrics and the results anyway.
LONG_RUN_MS: Final = 1_000


@dataclass(eq=False)
class Job:
    """A task taken off ``tasks`` and its progress; ``result`` is kept to send it again."""

    task: Task
    token: OffsetToken
    state: State = "ready"
    started_s: float = 0.0  # monotonic, set by the runtime when the handler starts
    started_mono_ms: int = 0  # the board's monotonic clock when it started
    next_heartbeat_mono_ms: int | None = None
    result: bytes | None = field(default=None, repr=False)


def heartbeat_interval_ms(task: Task) -> int | None:
    """A third of the task's timeout (``deadline_ms - dispatched_ms``); None if it has none."""
    timeout_ms = task.deadline_ms - task.dispatched_ms
    return max(MIN_HEARTBEAT_MS, timeout_ms // 3) if timeout_ms > 0 else None


class JobBoard:
    """Tasks taken and not finished, at most ``concurrency`` of them running."""

    def __init__(self, concurrency: int, max_run_ms: int | None = None) -> None:
        self._concurrency = concurrency
        self._max_run_ms = max_run_ms
        self._jobs: set[Job] = set()
        self._waiting: list[tuple[int, int, Job]] = []  # (end_ms, arrival, job), lazily pruned
        self._ready: deque[Job] = deque()
        self._running: set[Job] = set()
        self._arrivals = 0
        # Lazily pruned, like `_waiting`: jobs taken and not started by deadline_ms; running jobs
        # by their next heartbeat (an entry whose time is not the job's is stale); running jobs
        # in the order they started, for `long_running`.
        self._deadlines: list[tuple[int, int, Job]] = []
        self._beats: list[tuple[int, int, Job]] = []
        self._starts: deque[Job] = deque()

    def __len__(self) -> int:
        """How many jobs are taken and not finished (what backpressure bounds)."""
        return len(self._jobs)

    def admit(self, task: Task, token: OffsetToken, now_ms: int) -> Job | None:
        """Take a task: it waits until its ``end_ms``, or is ready; None if already expired."""
        if now_ms >= task.deadline_ms:
            return None
        job = Job(task, token)
        self._jobs.add(job)
        self._arrivals += 1
        if now_ms < task.end_ms:
            job.state = "waiting"
            heapq.heappush(self._waiting, (task.end_ms, self._arrivals, job))
        else:
            self._ready.append(job)
        if len(self._deadlines) > 2 * len(self._jobs) + 64:
            self._deadlines = [e for e in self._deadlines if e[2].state in ("waiting", "ready")]
            heapq.heapify(self._deadlines)
        heapq.heappush(self._deadlines, (task.deadline_ms, self._arrivals, job))
        return job

    def start_due(self, now_ms: int, mono_ms: int | None = None) -> tuple[list[Job], list[Job]]:
        """Jobs to start now, as threads are free, and jobs that expired before they could.

        Started jobs are ``running`` with their first heartbeat scheduled: a third of the
        timeout after dispatch, or at once if that time has passed while the task waited.
        ``mono_ms`` is the monotonic clock (None: a test that runs both clocks as one).
        """
        if mono_ms is None:
            mono_ms = now_ms
        expired = []
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now_ms:
            job = heapq.heappop(deadlines)[2]
            if job.state in ("waiting", "ready"):
                job.state = "dropped"
                self._jobs.discard(job)
                expired.append(job)
        if expired:
            self._prune()
        while self._waiting and self._waiting[0][0] <= now_ms:
            job = heapq.heappop(self._waiting)[2]
            if job.state == "waiting":
                job.state = "ready"
                self._ready.append(job)
        started: list[Job] = []
        while self._ready and len(self._running) < self._concurrency:
            job = self._ready.popleft()
            if job.state != "ready":
                continue
            job.state = "running"
            job.started_mono_ms = mono_ms
            interval = heartbeat_interval_ms(job.task)
            if interval is not None:
                # the one wall-clock reading: how long until a third of the timeout has passed
                wait_ms = max(0, job.task.dispatched_ms + interval - now_ms)
                self._beat_at(job, mono_ms + wait_ms)
            self._running.add(job)
            self._starts.append(job)
            started.append(job)
        return started, expired

    def _beat_at(self, job: Job, at_ms: int) -> None:
        job.next_heartbeat_mono_ms = at_ms
        beats = self._beats
        if len(beats) > 2 * len(self._running) + 64:  # mostly jobs that have finished
            beats[:] = [e for e in beats if e[2] in self._running]
            heapq.heapify(beats)
        self._arrivals += 1
        heapq.heappush(beats, (at_ms, self._arrivals, job))

    def heartbeats_due(self, mono_ms: int) -> list[Job]:
        """Running jobs whose heartbeat is due at the monotonic ``mono_ms``; each next one is
        scheduled an interval later.

        A job running for longer than ``max_run_ms`` gets none any more: a hung handler must
        not keep its window from timing out at the coordinator.
        """
        due: list[Job] = []
        max_run_ms = self._max_run_ms
        beats = self._beats
        while beats and beats[0][0] <= mono_ms:
            at_ms, _, job = heapq.heappop(beats)
            if job not in self._running or job.next_heartbeat_mono_ms != at_ms:
                continue  # finished, or rescheduled since
            ran_ms = mono_ms - job.started_mono_ms
            if max_run_ms is not None and ran_ms >= max_run_ms:
                job.next_heartbeat_mono_ms = None
                log.warning(
                    "task %s has run for %d s; no more heartbeats, so the coordinator can "
                    "time it out (its thread stays busy until the handler returns)",
                    job.task.task_id,
                    ran_ms // 1000,
                )
                continue
            due.append(job)
        for job in due:  # scheduled after the loop: a next time already due waits a turn
            interval = heartbeat_interval_ms(job.task)
            assert interval is not None
            self._beat_at(job, mono_ms + interval)
        return due

    def long_running(self, mono_ms: int) -> list[Job]:
        """Running jobs that reached ``LONG_RUN_MS`` since the last call, each said once."""
        found = []
        starts = self._starts
        while starts and starts[0].started_mono_ms + LONG_RUN_MS <= mono_ms:
            job = starts.popleft()
            if job in self._running:
                found.append(job)
        return found

    def returned(self, job: Job) -> bool:
        """A handler call ended; True if its outcome is wanted (not answered at shutdown)."""
        self._running.discard(job)
        return job.state == "running"

    def answered(self, job: Job, result: bytes) -> None:
        """The job's result is decided (``result``) and being sent; it no longer runs."""
        job.state = "answered"
        job.result = result
        self._running.discard(job)

    def delivered(self, job: Job) -> None:
        """The job's result is delivered: it leaves the board."""
        job.state = "delivered"
        self._jobs.discard(job)

    def drop_unstarted(self, partitions: Iterable[Partition]) -> list[Job]:
        """Forget jobs of ``partitions`` that have not started (their new owner redoes them)."""
        keys = set(partitions)
        dropped = [
            j for j in self._jobs if j.state in ("waiting", "ready") and j.token.partition in keys
        ]
        for job in dropped:
            job.state = "dropped"
            self._jobs.discard(job)
        if dropped:
            self._prune()
        return dropped

    def _prune(self) -> None:
        """Forget jobs that left unstarted from the queues; else, while every thread is stuck
        in a handler, each task taken and expired (or revoked) would stay queued for good."""
        self._ready = deque(j for j in self._ready if j.state == "ready")
        self._waiting = [entry for entry in self._waiting if entry[2].state == "waiting"]
        heapq.heapify(self._waiting)

    def unstarted(self) -> list[Job]:
        """Jobs waiting or ready, in offset order per partition."""
        found = [j for j in self._jobs if j.state in ("waiting", "ready")]
        return sorted(found, key=lambda j: (j.token.partition, j.token.offset))

    @property
    def busy(self) -> bool:
        """Whether a handler is running (its outcome will come back through the queue)."""
        return bool(self._running)

    def running(self) -> list[Job]:
        """Jobs whose handler is running and whose outcome is still wanted."""
        return list(self._running)
