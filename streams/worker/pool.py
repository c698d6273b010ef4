"""A fixed set of daemon threads that run handler calls.

Not ``concurrent.futures.ThreadPoolExecutor``: its threads are joined when the interpreter
exits, so one handler stuck in a call without a timeout would keep a stopped worker process
alive forever. These threads are daemons; ``close`` waits for them only up to a deadline.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

log = logging.getLogger("streams.worker")


class HandlerPool:
    """``size`` threads taking calls from one queue; the caller bounds how many are queued.

    The threads start with ``start`` (not on construction, so that a runtime built and never
    run leaves nothing behind).
    """

    def __init__(self, size: int, name: str = "tidemark-handler") -> None:
        self._calls: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._serve, name=f"{name}-{i}", daemon=True)
            for i in range(size)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def submit(self, call: Callable[[], None]) -> None:
        """Run ``call`` on the next free thread. ``call`` must not raise."""
        self._calls.put(call)

    def close(self, timeout_s: float) -> bool:
        """Let every thread finish its current call and stop; True if all stopped in time."""
        started = [t for t in self._threads if t.ident is not None]
        for _ in started:
            self._calls.put(None)
        deadline = time.monotonic() + timeout_s
        for thread in started:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [t.name for t in self._threads if t.is_alive()]
        if stuck:
            log.warning("handler threads still busy at exit, left behind: %s", ", ".join(stuck))
        return not stuck

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            try:
                call()
            except BaseException:  # a call that breaks its promise must not take the thread
                log.exception("a handler call raised past its guard")
