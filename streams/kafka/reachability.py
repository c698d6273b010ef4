"""Whether a process's Kafka clients reach the brokers, from what the clients report.

A broker outage is something to wait out, not a reason to exit (README Guarantees): the
clients retry by themselves and resume when the brokers are back. What the process owes its
operator meanwhile is to say that it is waiting, since when and on what error, without a
flood of client errors (aiokafka logs about 120 lines a second while no broker answers).

`BrokerWatch` is the rule, pure (`now_ms` is given): a client reports each failure to reach
a broker (`unreachable`) and each sign that one answers (`reachable`: a record read, a
statistics report with a broker up). It is waiting from the first failure after the last
answer until the next answer, or, for clients that report only failures (aiokafka's log),
until no failure has come for `quiet_ms`. While waiting, `warning_due` gives one line a
`warn_every_ms` (a minute) saying for how long; `recovered` gives the line that says it ended.
It is thread-safe: a client's callbacks, a loop and a health page may call it at once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

WARN_EVERY_MS = 60_000
# A wait shorter than this is a blip (one connection lost and made again, a line aiokafka logs as
# a broker comes back): its end is not announced.
SAID_AFTER_MS = 5_000


@dataclass(frozen=True, slots=True)
class Waiting:
    since_ms: int
    waited_ms: int
    last_error: str
    failures: int  # failures reported since it began

    def describe(self) -> str:
        return (
            f"waiting for the Kafka brokers for {self.waited_ms / 1000:.0f} s "
            f"({self.failures} failed attempts); last error: {self.last_error}"
        )


class BrokerWatch:
    def __init__(self, warn_every_ms: int = WARN_EVERY_MS, quiet_ms: int | None = None) -> None:
        """`quiet_ms`: with no failure for this long, the brokers count as reachable again (for
        clients that report their failures and never their successes); None: only
        `reachable` ends a wait."""
        self.warn_every_ms = warn_every_ms
        self.quiet_ms = quiet_ms
        self._lock = threading.Lock()
        self._since_ms: int | None = None  # the first failure of the current wait
        self._last_failure_ms = 0
        self._last_error = ""
        self._failures = 0
        self._warned_ms: int | None = None
        self._ended: Waiting | None = None  # a wait that ended and was not said yet

    def unreachable(self, now_ms: int, error: str) -> bool:
        """A client failed to reach a broker; True if this begins a wait."""
        with self._lock:
            self._expire(now_ms)
            began = self._since_ms is None
            if began:
                self._since_ms = now_ms
                self._failures = 0
                self._warned_ms = now_ms  # the first failure is logged as it comes
            self._last_failure_ms = now_ms
            self._last_error = error
            self._failures += 1
            return began

    def reachable(self, now_ms: int) -> None:
        """A broker answered: a wait, if any, ends."""
        with self._lock:
            self._end(now_ms)

    def waiting(self, now_ms: int) -> Waiting | None:
        """The current wait, None if the brokers answer."""
        with self._lock:
            self._expire(now_ms)
            return self._current(now_ms)

    def warning_due(self, now_ms: int) -> Waiting | None:
        """The current wait, once every `warn_every_ms` of it (None otherwise)."""
        with self._lock:
            self._expire(now_ms)
            current = self._current(now_ms)
            if current is None or self._warned_ms is None:
                return None
            if now_ms - self._warned_ms < self.warn_every_ms:
                return None
            self._warned_ms = now_ms
            return current

    def recovered(self) -> Waiting | None:
        """The last wait that ended, once (for the line that says the brokers are back), if it
        lasted `SAID_AFTER_MS` at least."""
        with self._lock:
            ended, self._ended = self._ended, None
            return ended if ended is not None and ended.waited_ms >= SAID_AFTER_MS else None

    def health(self, now_ms: int) -> dict[str, Any]:
        """For a /health document: `{"kafka": "ok"}` or what it waits for."""
        current = self.waiting(now_ms)
        if current is None:
            return {"kafka": "ok"}
        return {
            "kafka": "waiting_for_brokers",
            "kafka_waiting_since_ms": current.since_ms,
            "kafka_waited_s": round(current.waited_ms / 1000, 1),
            "kafka_last_error": current.last_error,
        }

    def _current(self, now_ms: int) -> Waiting | None:
        if self._since_ms is None:
            return None
        return Waiting(self._since_ms, now_ms - self._since_ms, self._last_error, self._failures)

    def _expire(self, now_ms: int) -> None:
        if self.quiet_ms is not None and now_ms - self._last_failure_ms > self.quiet_ms:
            self._end(self._last_failure_ms + self.quiet_ms)

    def _end(self, now_ms: int) -> None:
        if self._since_ms is not None:
            ended = self._current(now_ms)
            # A blip right after a long wait (aiokafka's first heartbeat as the group coordinator
            # loads, between two records read) ends before the long wait was said: it must not
            # take the long wait's place, or the line that the brokers are back never comes.
            pending = self._ended
            if (
                pending is None
                or pending.waited_ms < SAID_AFTER_MS
                or (ended is not None and ended.waited_ms >= SAID_AFTER_MS)
            ):
                self._ended = ended
            self._since_ms = None
            self._warned_ms = None
