"""The chaos auditor's consumer: every record of the audited topics, read to their ends.

The first version subscribed a consumer group, logged nothing below CRITICAL, had no error
callback, and ran on a daemon thread whose death only the default excepthook would have told:
in a fresh-clone run of 100 kills it stopped reading 6 s in and the run audited a partial read
(docs/reliability.md, "The auditor went blind"). This one cannot be blind without saying so:

- Partitions are assigned by hand from offset 0: no group, so no rebalance, no group
  coordinator and no committed offsets that a broker restart or a kill could disturb; it
  restarts exactly where it stopped (`reached`), never re-reading nor skipping a record.
- Partition EOF is on, so `reached` counts the transaction markers a read_committed consumer
  never receives: a partition is read to its end when `reached` equals its last stable offset.
- Every `REPORT_EVERY_S` it says what it read per topic and the newest record's age.
- Every `CHECK_EVERY_S` it applies streams.kafka.progress's stall rule against the partitions'
  last stable offsets; a stall is said at once, counted, and the consumer renewed.
- An exception on its thread is said with its traceback and kept in `failure`; `read_to_end`
  then fails, and the run with it: the run never audits a read it knows to be partial.
"""

from __future__ import annotations

import time
import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from streams.kafka.progress import ProgressWatch
from streams.kafka.settings import KafkaSettings
from streams.kafka.topic_io import watermarks

from .auditor import Seen

REPORT_EVERY_S = 10.0
CHECK_EVERY_S = 2.0
# Longer than a fetch, shorter than anything the run waits for: a stall is said within it.
STALL_BOUND_MS = 15_000

Partition = tuple[str, int]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class AuditReader:
    def __init__(
        self,
        kafka: KafkaSettings,
        prefix: str,
        topics: tuple[str, ...],
        observe: Callable[[Seen], None],
        say: Callable[[str], None],
        halt: Any,  # a threading.Event
    ) -> None:
        self.kafka = kafka
        self.prefix = prefix
        self.names = [f"{prefix}.{t}" for t in topics]
        self.observe = observe
        self.say = say
        self.halt = halt
        self.reached: dict[Partition, int] = {}  # the next offset to read, markers counted
        self.counts: Counter[str] = Counter()
        self.newest_ms = 0  # the newest record's timestamp
        self.stalls: list[str] = []
        self.renewals = 0
        self.failure: str | None = None
        self.turned_ms = 0  # when its loop last turned
        self._admin = AdminClient(kafka.librdkafka(log_level=0))
        self._watch = ProgressWatch(STALL_BOUND_MS)

    # -- the thread --------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._read()
        except BaseException as exc:  # said and kept: the run fails on it
            self.failure = f"{type(exc).__name__}: {exc}"
            self.say(f"the auditor's consumer DIED: {self.failure}\n{traceback.format_exc()}")

    def _consumer(self) -> Consumer:
        consumer = Consumer(
            self.kafka.consumer(
                **{
                    "group.id": f"{self.prefix}-auditor",  # required; never joined
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "enable.partition.eof": True,
                    "auto.offset.reset": "earliest",
                    "error_cb": lambda err: self.say(f"auditor's consumer: {err}"),
                    "log_level": 4,  # librdkafka's warnings and errors, on stderr
                }
            )
        )
        try:
            ends = self._ends()
        except Exception:  # the broker is away: renewed, it goes on with the partitions it had
            if not self.reached:
                raise
            ends = {}
        for tp in ends:
            self.reached.setdefault(tp, 0)
        consumer.assign([TopicPartition(t, p, o) for (t, p), o in self.reached.items()])
        return consumer

    def _ends(self) -> dict[Partition, int]:
        return {tp: end for tp, (_, end) in watermarks(self._admin, self.names, 10.0).items()}

    def _read(self) -> None:
        cut = len(self.prefix) + 1
        consumer = self._consumer()
        next_check = next_report = time.monotonic()
        try:
            while not self.halt.is_set():
                self.turned_ms = _now_ms()
                for msg in consumer.consume(1000, 0.2):
                    topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF and topic is not None:
                            tp = (topic, partition)
                            self.reached[tp] = max(self.reached.get(tp, 0), offset)
                        else:
                            self.say(f"auditor's consumer: {error}")
                        continue
                    self.reached[(topic, partition)] = offset + 1
                    self.counts[topic[cut:]] += 1
                    self.newest_ms = max(self.newest_ms, msg.timestamp()[1])
                    self.observe(Seen(topic[cut:], partition, offset, msg.key(), msg.value()))
                now = time.monotonic()
                if now >= next_report:
                    next_report = now + REPORT_EVERY_S
                    self.say(self.progress())
                if now >= next_check:
                    next_check = now + CHECK_EVERY_S
                    if self._stalled():
                        consumer.close()
                        consumer = self._consumer()
                        self.renewals += 1
                        self._watch.reset(_now_ms())
        finally:
            consumer.close()

    def _stalled(self) -> bool:
        try:
            ends = self._ends()
        except Exception as exc:  # the broker is away (restarting): no facts, no verdict
            self.say(f"auditor: the topics' ends are unknown for now: {exc}")
            return False
        stall = self._watch.observe(dict(self.reached), ends, _now_ms())
        if stall is None:
            return False
        line = f"the auditor's consumer STALLED, renewing it: {stall.describe()}"
        self.stalls.append(line)
        self.say(line)
        return True

    # -- what it read ------------------------------------------------------------------------

    def progress(self) -> str:
        counts = ", ".join(f"{t} {n}" for t, n in sorted(self.counts.items())) or "nothing"
        age = f"{(_now_ms() - self.newest_ms) / 1000:.1f} s" if self.newest_ms else "-"
        return f"auditor read: {counts}; newest record {age} old"

    def blocked(self, bound_ms: int = STALL_BOUND_MS) -> str | None:
        """Said by another thread: this one's loop has not turned for `bound_ms` (blocked in a
        call, or in `observe`), which its own stall check cannot see."""
        idle_ms = _now_ms() - self.turned_ms
        if self.failure is None and self.turned_ms and idle_ms > bound_ms:
            return f"the auditor's reading thread is BLOCKED: no turn of its loop for {idle_ms} ms"
        return None

    def read_to_end(self, timeout_s: float) -> list[str]:
        """Wait until every partition was read to its end as of now; the shortfall, if any."""
        if self.failure is not None:
            return [f"the auditor's consumer died: {self.failure}"]
        deadline = time.monotonic() + timeout_s
        while True:  # asked again while a node is still coming back (cluster mode)
            try:
                targets = self._ends()
                break
            except Exception as exc:
                if time.monotonic() > deadline:
                    return [f"the auditor could not learn the topics' ends in {timeout_s:g} s: "
                            f"{type(exc).__name__}: {exc}"]  # fmt: skip
                time.sleep(1.0)
        while True:
            short = {tp: (self.reached.get(tp, 0), e) for tp, e in targets.items()
                     if self.reached.get(tp, 0) < e}  # fmt: skip
            if not short or self.failure is not None or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        out = [
            f"the auditor did not read {t}[{p}] to its end: at {r} of {e}"
            for (t, p), (r, e) in sorted(short.items())
        ]
        if self.failure is not None:
            out.append(f"the auditor's consumer died: {self.failure}")
        return out
