"""A stalled loop says so: the stacks of every thread, logged while the loop is still stuck;
and a slow step is logged when it ends.

The confluent engine's loop beats once per step. Every blocking call it makes has a timeout,
so a step that has not ended after `stall_s` is either a long restore (or a chain of calls
waiting out a gone broker) or a step stuck where no timeout reaches. After a broker restart,
the chaos run saw a coordinator blocked in `send_offsets_to_transaction` for 5 minutes, its
1 s timeout ignored: a librdkafka defect that `METADATA_RECOVERY` (streams/kafka/settings.py)
now keeps from happening, found through these stacks. The watchdog logs the Python stacks
of all threads (faulthandler; this needs the stuck call to have released the GIL, as
librdkafka's blocking calls do), once per stall, and again if the same stall lasts another
`stall_s`.

It only reports: a step can legitimately be long (restoring a million streams from the
changelog takes about a minute), and Kafka's own `max.poll.interval.ms` is what takes the
partitions of a member that stays stuck away from it.
"""

from __future__ import annotations

import faulthandler
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

log = logging.getLogger("streams.coordinator")

STALL_S = 60.0
# A step this long is logged (at info) when it ends: what the latency tail is made of.
SLOW_STEP_S = 0.25


class LoopWatchdog:
    def __init__(
        self,
        stall_s: float = STALL_S,
        slow_s: float = SLOW_STEP_S,
        out: Callable[[], TextIO] = lambda: sys.stderr,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stall_s = stall_s
        self.slow_s = slow_s
        self.slow_steps = 0
        self._out = out
        self._clock = clock
        self.beat_at = clock()
        self.reports = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)

    def beat(self) -> None:
        """The loop came around (it runs on every step: a clock read and a compare)."""
        now = self._clock()
        took_s = now - self.beat_at
        self.beat_at = now
        if took_s >= self.slow_s:
            self.slow_steps += 1
            log.info("one step of the loop took %.0f ms", took_s * 1000)

    def idle(self) -> None:
        """The loop waits on purpose (for the brokers to come back): neither a stall nor a
        slow step."""
        self.beat_at = self._clock()

    def start(self) -> LoopWatchdog:
        self.beat_at = self._clock()  # what came before the loop is not a step
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        reported_at: float | None = None  # the beat of the stall last reported
        while not self._stop.wait(min(5.0, self.stall_s / 4)):
            reported_at = self.check(reported_at)

    def check(self, reported_at: float | None) -> float | None:
        """Report a stall once it has lasted `stall_s` since the last beat or the last report;
        return the time the report covers up to (None while the loop runs)."""
        beat_at, now = self.beat_at, self._clock()
        if now - beat_at < self.stall_s:
            return None
        since = beat_at if reported_at is None or reported_at < beat_at else reported_at
        if now - since < self.stall_s:
            return reported_at
        self.reports += 1
        log.error(
            "the coordinator's loop has been in one step for %.0f s: a restore of many streams "
            "takes that long, anything else is stuck; the stacks of its threads follow",
            now - beat_at,
        )
        out = self._out()
        out.flush()
        faulthandler.dump_traceback(file=out, all_threads=True)
        out.flush()
        return now
