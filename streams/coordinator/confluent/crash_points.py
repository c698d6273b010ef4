"""The crash-point test hook of the confluent engine.

`TIDEMARK_CRASH_AT="<point>:<n>"` SIGKILLs the process the n-th time it reaches the point, so
that the crash-point tests (tests/coordinator/test_eos.py) can stop it between the steps of a
commit. Unset, it does nothing.
"""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger("streams.coordinator")

CRASH_POINTS = ("after_produce", "after_send_offsets", "after_commit", "after_rocksdb_write")


class CrashHook:
    def __init__(self, spec: str | None) -> None:
        self.point: str | None = None
        self.left = 0
        if spec:
            point, _, count = spec.partition(":")
            if point not in CRASH_POINTS:
                raise SystemExit(f"TIDEMARK_CRASH_AT: {point!r} is not one of {CRASH_POINTS}")
            self.point, self.left = point, int(count or "1")

    def reached(self, point: str) -> None:
        if point == self.point:
            self.left -= 1
            if self.left <= 0:
                log.warning("crash hook: SIGKILL at %s", point)
                logging.shutdown()
                os.kill(os.getpid(), signal.SIGKILL)
