"""The Faust engine through a broker outage: what aiokafka says, turned into one wait.

aiokafka retries by itself (every `retry_backoff_ms`, 100 ms) and the Faust app goes on when
a broker answers again (a 90 s and a 5 min outage of the only broker: docs/reliability.md
"Findings"). What it does meanwhile is log each failed attempt at ERROR: about 120 lines a
second, 11,700 lines for a 90 s outage, and nothing that says since when it waits.

`OutageLogFilter` sits on aiokafka's loggers: each line that means no broker answered (the
templates below, or an error argument of a connection kind) is reported to a `BrokerWatch`,
and let through at most once every `every_ms` (the first one at once, so the cause is in the
log); the others are counted. The coordinator's tick logs the watch's WARNING once a minute
("waiting for the Kafka brokers for N s ..."), `/health` shows the wait, and the watch's wait
ends when the agent reads a record, or when no such line has come for `QUIET_MS` (aiokafka
never says that it reconnected).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from streams import clock
from streams.kafka.reachability import BrokerWatch

# What aiokafka (0.14) logs when it cannot reach a broker: `record.msg`, before formatting.
UNREACHABLE_TEMPLATES = frozenset(
    {
        'Unable connect to "%s:%s": %s',
        'Unable to request metadata from "%s:%s": %s',
        "Unable to request metadata from node with id %s: %r",
        "Unable to update metadata from %s",
        "Unable connect to node with id %s: %s",
        "Error sending %s to node %s [%s] -- marking coordinator dead",
        "Marking the coordinator dead (node %s)for group %s.",
        "Group Coordinator Request failed: %s",
        "Heartbeat session expired - marking coordinator dead",
        "Heartbeat send request failed: %s. Will retry.",
        "Heartbeat failed for group %s: coordinator (node %s) is either not started or not valid",
        "Failed fetch messages from %s: %s",
        "Got error produce response: %s",
    }
)
# aiokafka's exception classes that mean a connection failed or timed out (by name, so that
# this module does not import aiokafka).
UNREACHABLE_ERRORS = frozenset(
    {
        "KafkaConnectionError",
        "NodeNotReadyError",
        "RequestTimedOutError",
        "KafkaTimeoutError",
        "GroupCoordinatorNotAvailableError",
        "CoordinatorNotAvailableError",
        "NotCoordinatorForGroupError",
        "ConnectionRefusedError",
        "ConnectionResetError",
    }
)
AIOKAFKA_LOGGERS = (
    "aiokafka",
    "aiokafka.conn",
    "aiokafka.cluster",
    "aiokafka.consumer.consumer",
    "aiokafka.consumer.fetcher",
    "aiokafka.consumer.group_coordinator",
    "aiokafka.producer.producer",
    "aiokafka.producer.sender",
)
# A client that reports only failures has reconnected once none came for this long (aiokafka
# fails an attempt every 100 ms while no broker answers).
QUIET_MS = 10_000
LOG_EVERY_MS = 60_000


def unreachable(record: logging.LogRecord) -> bool:
    """Whether an aiokafka log record says that no broker answered."""
    if record.msg in UNREACHABLE_TEMPLATES:
        return True
    args: Iterable[object] = record.args if isinstance(record.args, tuple) else ()
    return any(type(arg).__name__ in UNREACHABLE_ERRORS for arg in args)


class OutageLogFilter(logging.Filter):
    def __init__(
        self,
        watch: BrokerWatch,
        every_ms: int = LOG_EVERY_MS,
        now_ms: Callable[[], int] = clock.now_ms,
    ) -> None:
        super().__init__()
        self.watch = watch
        self.every_ms = every_ms
        self._now_ms = now_ms
        self._lock = threading.Lock()
        self._passed_ms: int | None = None
        self.suppressed = 0  # lines held back since the last one let through

    def filter(self, record: logging.LogRecord) -> bool:
        if not unreachable(record):
            return True
        now = self._now_ms()
        self.watch.unreachable(now, record.getMessage())
        with self._lock:
            if self._passed_ms is not None and now - self._passed_ms < self.every_ms:
                self.suppressed += 1
                return False
            self._passed_ms = now
            if self.suppressed:
                record.msg = f"{record.msg} (and {self.suppressed} such lines in the last minute)"
                self.suppressed = 0
            return True

    def install(self, names: Iterable[str] = AIOKAFKA_LOGGERS) -> OutageLogFilter:
        """On each of aiokafka's loggers (a logger's filter sees only its own records), in
        place of one installed before (an app built again in the same process)."""
        for name in names:
            logger = logging.getLogger(name)
            for old in [f for f in logger.filters if isinstance(f, OutageLogFilter)]:
                logger.removeFilter(old)
            logger.addFilter(self)
        return self

    def uninstall(self, names: Iterable[str] = AIOKAFKA_LOGGERS) -> None:
        for name in names:
            logging.getLogger(name).removeFilter(self)


def say_waiting(watch: BrokerWatch, log: logging.Logger, now_ms: int) -> None:
    """Once a minute while it waits, and once when the brokers answer again."""
    waiting = watch.warning_due(now_ms)
    if waiting is not None:
        log.warning("%s; aiokafka goes on retrying", waiting.describe())
    ended = watch.recovered()
    if ended is not None:
        log.warning("Kafka brokers answer again after %.0f s", ended.waited_ms / 1000)
