"""In-memory fakes of the worker's ports (``streams.worker.ports``): a task source, a result
sink, a held executor.

Like librdkafka, the source calls its listener only inside ``poll`` (rebalances a test asks
for happen at the next poll) and the sink calls ``delivered`` only inside ``poll`` or
``flush``. Nothing here sleeps or starts a thread: a test drives ``WorkerRuntime.turn()`` at
explicit ``now_ms`` values and decides when the broker confirms a send and when a handler call
runs (``streams.testing.worker.InProcessWorker`` puts them together).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streams.handler import Task
from streams.kafka.member import Delivered, Fetched, Partition, SourceListener
from streams.wire import encode_task

TASKS = "tidemark.tasks"


class InMemoryTaskSource:
    """Records per partition; ``assign``, ``revoke`` and ``lose`` take effect at the next poll."""

    def __init__(self) -> None:
        self.logs: dict[Partition, list[bytes | None]] = {}
        self.positions: dict[Partition, int] = {}  # the next offset to fetch, per assigned one
        self.commits: list[tuple[dict[Partition, int], bool]] = []  # (positions, waited)
        self.committed: dict[Partition, int] = {}
        self.paused = False
        self.pauses = 0
        self.closed = False
        self.fail_commits = False
        self.poll_timeouts: list[float] = []
        self._events: deque[tuple[str, list[Partition]]] = deque()
        self._listener: SourceListener | None = None

    # -- what a test does --------------------------------------------------------------------

    def append(self, partition: Partition, value: bytes | None) -> int:
        """Add a record to ``partition``; return its offset."""
        log = self.logs.setdefault(partition, [])
        log.append(value)
        return len(log) - 1

    def add_task(self, task: Task, partition: Partition = (TASKS, 0)) -> int:
        return self.append(partition, encode_task(task))

    def assign(self, *partitions: Partition) -> None:
        self._events.append(("assigned", list(partitions)))

    def revoke(self, *partitions: Partition) -> None:
        self._events.append(("revoked", list(partitions)))

    def lose(self, *partitions: Partition) -> None:
        self._events.append(("lost", list(partitions)))

    def fail_async_commit(self, *partitions: Partition) -> None:
        """The broker refused the last asynchronous commit of these partitions."""
        self._events.append(("commit_failed", list(partitions)))

    # -- TaskSource ---------------------------------------------------------------------------

    def open(self, listener: SourceListener) -> None:
        self._listener = listener

    def poll(self, timeout_s: float) -> Fetched | None:
        assert self._listener is not None, "poll before open"
        self.poll_timeouts.append(timeout_s)
        while self._events:
            kind, partitions = self._events.popleft()
            if kind == "assigned":
                self._listener.assigned(partitions)
                for p in partitions:  # a new owner starts at the group's committed offset
                    self.positions[p] = self.committed.get(p, 0)
            elif kind == "commit_failed":
                self._listener.commit_failed(partitions)
            else:
                (self._listener.revoked if kind == "revoked" else self._listener.lost)(partitions)
                for p in partitions:
                    self.positions.pop(p, None)
        if self.paused:
            return None
        for partition, position in sorted(self.positions.items()):
            log = self.logs.get(partition, [])
            if position < len(log):
                self.positions[partition] = position + 1
                return Fetched(partition, position, log[position])
        return None

    def pause(self) -> None:
        self.paused = True
        self.pauses += 1

    def resume(self) -> None:
        self.paused = False

    def commit(self, positions: Mapping[Partition, int], *, wait: bool) -> bool:
        if self.fail_commits:
            return False
        self.commits.append((dict(positions), wait))
        self.committed.update(positions)
        return True

    def close(self) -> None:
        self.closed = True


@dataclass
class Sent:
    key: bytes
    value: bytes
    delivered: Delivered = field(repr=False)

    def json(self) -> Any:
        return json.loads(self.value)


class InMemoryResultSink:
    """Records every send. ``confirm`` (or ``fail``) decides the broker's answer to those sent
    so far; the answers reach the runtime at its next ``poll`` or ``flush``. A ``flush`` confirms
    what is still unanswered, unless the broker is ``down``."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.down = False
        self.opened = False
        self._unanswered: list[Sent] = []
        self._answers: list[tuple[Sent, str | None]] = []

    def confirm(self) -> int:
        return self._answer(None)

    def fail(self, reason: str = "broker said no") -> int:
        return self._answer(reason)

    def _answer(self, error: str | None) -> int:
        answered, self._unanswered = self._unanswered, []
        self._answers.extend((s, error) for s in answered)
        return len(answered)

    def values(self, outcome: str | None = None) -> list[dict[str, Any]]:
        found = [s.json() for s in self.sent]
        return [v for v in found if outcome is None or v["outcome"] == outcome]

    def open(self, on_fatal: Callable[[str], None]) -> None:
        self.opened = True

    def send(self, key: bytes, value: bytes, delivered: Delivered) -> None:
        sent = Sent(key, value, delivered)
        self.sent.append(sent)
        self._unanswered.append(sent)

    def poll(self) -> None:
        answers, self._answers = self._answers, []
        for sent, error in answers:
            sent.delivered(error)

    def flush(self, timeout_s: float) -> int:
        if not self.down:
            self.confirm()
        self.poll()
        return len(self._unanswered)


class CallRunner:
    """Runs handler calls in the caller's thread: a thread call as it is, a coroutine call to
    its end on one event loop kept for every call, as the worker keeps one (a handler's client
    session belongs to the loop it was made on, and a second loop would find it unusable)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    def __call__(self, call: Callable[[], object]) -> None:
        made = call()
        if inspect.iscoroutine(made):
            if self._loop is None or self._loop.is_closed():
                self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(made)

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()


class HeldExecutor:
    """Handler calls wait here until a test runs them: a held call is a running task.

    It serves both kinds of handler: a coroutine call is run to its end, on the executor's one
    event loop, when the test runs it (``run_all``, or ``run`` for one of ``held``)."""

    def __init__(self) -> None:
        self.held: list[Callable[[], object]] = []
        self.started = False
        self.closed = False
        self._runner = CallRunner()

    def start(self) -> None:
        self.started = True

    def submit(self, call: Callable[[], object]) -> None:
        self.held.append(call)

    def run(self, call: Callable[[], object]) -> None:
        """Run one call taken from ``held``."""
        self._runner(call)

    def run_all(self) -> int:
        calls, self.held = self.held, []
        for call in calls:
            self._runner(call)
        return len(calls)

    def close(self, timeout_s: float, last: Callable[[], object] | None = None) -> bool:
        """Close; ``last`` (a coroutine handler's ``aclose``) runs at once, on the loop."""
        self.closed = True
        if last is not None:
            self._runner(last)
        self._runner.close()
        return not self.held
