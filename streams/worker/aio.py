"""One asyncio loop on a thread of its own, running a coroutine handler's calls as tasks.

A coroutine handler waits on I/O without holding a thread, so one loop carries hundreds of
calls at once where a thread pool would need hundreds of threads. How many run at once is the
runtime's to bound (``streams.worker.jobs.JobBoard``, at the worker's concurrency): this
executor runs whatever it is given. The thread is a daemon, like the handler pool's, so that a
call that ignores its cancellation cannot keep a stopped worker alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger("streams.worker")

Call = Callable[[], Coroutine[Any, Any, None]]


class LoopExecutor:
    """Runs each submitted coroutine call as a task on one event loop, on one thread.

    The loop and its thread start with ``start`` (a runtime built and never run leaves
    nothing behind); ``close`` cancels the calls still running, so that each one's ``finally``
    and ``async with`` blocks run, and waits for them up to a deadline.
    """

    def __init__(self, name: str = "tidemark-async") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Calls submitted and not yet on the loop. One wake-up of the loop serves them all: a
        # wake-up per call (`call_soon_threadsafe` writes to the loop's self-pipe) took a fifth
        # of the worker's loop thread with 500 calls in flight (py-spy).
        self._submitted: deque[Call] = deque()
        self._wake_sent = False

    def start(self) -> None:
        loop = asyncio.new_event_loop()
        running = threading.Event()
        loop.call_soon(running.set)
        self._loop = loop
        self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
        self._thread.start()
        running.wait()

    def submit(self, call: Call) -> None:
        """Start ``call()`` on the loop; it must not raise. Safe from any thread."""
        assert self._loop is not None, "submit before start"
        self._submitted.append(call)
        if not self._wake_sent:  # else the wake-up sent has not run yet: it will take this one
            self._wake_sent = True
            self._loop.call_soon_threadsafe(self._spawn_submitted)

    def close(self, timeout_s: float, last: Call | None = None) -> bool:
        """Cancel the running calls, wait up to ``timeout_s`` for them, run ``last`` (the
        handler's ``aclose``: what it closes belongs to this loop, and no call uses it any
        more), stop the loop; True if every call ended in time."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return True
        ended = asyncio.run_coroutine_threadsafe(self._cancel_all(timeout_s, last), loop)
        try:
            all_ended = ended.result(timeout_s + 1.0)
        except (TimeoutError, RuntimeError):  # the loop is blocked by a call: leave it behind
            all_ended = False
        loop.call_soon_threadsafe(loop.stop)
        thread.join(1.0)
        if thread.is_alive():
            log.warning("the handler loop is still busy at exit (a call blocks it); left behind")
            return False
        loop.close()
        return all_ended

    @property
    def running(self) -> int:
        """How many calls are on the loop (read from the loop's thread for an exact count)."""
        return len(self._tasks)

    def _serve(self) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            with contextlib.suppress(RuntimeError):  # closed from another path already
                loop.run_until_complete(loop.shutdown_asyncgens())

    def _spawn_submitted(self) -> None:
        # The flag goes down before the queue is read: a call submitted from now on either is
        # read below or sends a wake-up of its own (deque appends and pops are atomic).
        self._wake_sent = False
        submitted = self._submitted
        while submitted:
            self._spawn(submitted.popleft())

    def _spawn(self, call: Call) -> None:
        assert self._loop is not None
        try:
            task = self._loop.create_task(call())
        except BaseException:  # a call that breaks its promise must not stop the loop
            log.exception("a handler call could not be started")
            return
        self._tasks.add(task)  # the loop keeps only weak references to its tasks
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("a handler call raised past its guard", exc_info=error)

    async def _cancel_all(self, timeout_s: float, last: Call | None) -> bool:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        pending: set[asyncio.Task[None]] = set()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        if pending:
            log.warning("%d handler calls still running after their cancellation", len(pending))
        if last is not None:
            try:
                await asyncio.wait_for(last(), timeout_s)
            except Exception:
                log.exception("closing the handler failed")
        return not pending
