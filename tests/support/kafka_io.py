"""Producing to and reading from Tidemark's topics in tests, with a deadline on every wait."""

from __future__ import annotations

import json
import threading
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Consumer, Producer

from streams.kafka.settings import KafkaSettings


class Feed:
    """Produces JSON values keyed like the contract says (murmur2, so they co-partition)."""

    def __init__(self, kafka: KafkaSettings, prefix: str) -> None:
        self.prefix = prefix
        self._producer = Producer(kafka.producer())

    def send(self, topic: str, value: Any, key: str | bytes | None = None) -> None:
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        if key is None and isinstance(value, dict):
            key = value.get("stream_id")
        key_bytes = key.encode() if isinstance(key, str) else key
        self._producer.produce(f"{self.prefix}.{topic}", raw, key_bytes)
        # Not checked: the responder answers through broker outages with this, and a record
        # left in the producer's queue goes out once the broker is back (an assert here killed
        # the responder in the full-outage test).
        self._producer.flush(10)

    def send_many(self, topic: str, values: Iterable[dict[str, Any]]) -> None:
        """Each value keyed by its stream_id, flushed once at the end."""
        for value in values:
            key = value["stream_id"].encode()
            self._producer.produce(f"{self.prefix}.{topic}", json.dumps(value).encode(), key)
            self._producer.poll(0)
        self._producer.flush(30)  # as `send`: what is left goes out with the next flush

    def upsert(self, stream_id: str, start_ms: int, **config: Any) -> None:
        self.send("control", {"type": "upsert", "stream_id": stream_id, "start_ms": start_ms,
                              **config})  # fmt: skip

    def result(self, task: dict[str, Any], outcome: str, **fields: Any) -> None:
        window = {k: task[k] for k in ("stream_id", "start_ms", "end_ms", "attempt")}
        self.send("results", {**window, "outcome": outcome, **fields})

    def ack(self, task: dict[str, Any], ack_ms: int | None = None) -> None:
        self.result(task, "ack", ack_ms=task["end_ms"] if ack_ms is None else ack_ms)

    def nack(self, task: dict[str, Any], kind: str = "no_data", message: str = "") -> None:
        self.result(task, "nack", error={"kind": kind, "message": message})


class Tail:
    """Reads topics from the beginning; `messages[topic]` holds (received_ms, key, value).

    Each record once: after a broker restart its group resumes from its last auto-committed
    offsets, and the records read since would otherwise show as the coordinator's repeats.
    """

    def __init__(self, kafka: KafkaSettings, prefix: str, topics: Iterable[str], group: str):
        self.prefix = prefix
        self.messages: dict[str, list[tuple[int, str, Any]]] = defaultdict(list)
        self._read: set[tuple[str | None, int | None, int | None]] = set()  # (topic, p, offset)
        self._consumer = Consumer(
            kafka.consumer(**{"group.id": group, "auto.offset.reset": "earliest"})
        )
        self._consumer.subscribe([f"{prefix}.{t}" for t in topics])

    def poll(self, timeout_s: float = 0.2) -> None:
        for msg in self._consumer.consume(500, timeout_s):
            if msg.error() is not None:
                continue
            at = (msg.topic(), msg.partition(), msg.offset())
            if at in self._read:
                continue
            self._read.add(at)
            topic = msg.topic().removeprefix(f"{self.prefix}.")
            key = (msg.key() or b"").decode()
            raw = msg.value()  # None: a tombstone
            value = None if raw is None else json.loads(raw)
            self.messages[topic].append((time.time_ns() // 1_000_000, key, value))

    def drain(self, quiet_s: float = 1.5, timeout_s: float = 30) -> None:
        """Read until nothing new arrives for `quiet_s` (everything committed so far is in)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            before = sum(len(m) for m in self.messages.values())
            self.poll(quiet_s)
            if sum(len(m) for m in self.messages.values()) == before:
                return
        raise AssertionError(f"topics still busy after {timeout_s} s")

    def values(self, topic: str, stream_id: str | None = None) -> list[Any]:
        return [v for _, _, v in self.messages[topic] if v is not None
                and (stream_id is None or v.get("stream_id") == stream_id)]  # fmt: skip

    def wait_for(self, what: str, check: Callable[[], Any], timeout_s: float = 30) -> Any:
        """Poll until `check()` is truthy and return it; fail with `what` at the deadline."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.poll()
            found = check()
            if found:
                return found
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; seen: "
                             + json.dumps({t: [v for _, _, v in m][-5:]
                                           for t, m in self.messages.items()})[:3000])  # fmt: skip

    def close(self) -> None:
        close_within(self._consumer, "the tail's consumer")


def close_within(consumer: Consumer, what: str, timeout_s: float = 30.0) -> None:
    """`consumer.close()`, given up after `timeout_s` (a warning): librdkafka's close once hung
    for good in a test's teardown (rd_kafka_consumer_close waiting on its queue, 20 minutes,
    its broker up), and a hung teardown hangs the whole run. The close goes on in its thread."""
    closer = threading.Thread(target=consumer.close, name=f"close {what}", daemon=True)
    closer.start()
    closer.join(timeout_s)
    if closer.is_alive():
        warnings.warn(f"{what}: close() did not return within {timeout_s:g} s; left behind",
                      stacklevel=2)  # fmt: skip


class Responder:
    """A stand-in worker: answers every task with `policy(task)` from a background thread.

    `policy` returns (outcome, fields) or None (no answer: the task times out).
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        prefix: str,
        group: str,
        policy: Callable[[dict[str, Any]], tuple[str, dict[str, Any]] | None],
    ) -> None:
        self.policy = policy
        self.seen: list[dict[str, Any]] = []
        self._feed = Feed(kafka, prefix)
        self._consumer = Consumer(
            kafka.consumer(**{"group.id": group, "auto.offset.reset": "earliest"})
        )
        self._consumer.subscribe([f"{prefix}.tasks"])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="responder", daemon=True)

    def __enter__(self) -> Responder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)
        close_within(self._consumer, "the responder's consumer")

    def _run(self) -> None:
        while not self._stop.is_set():
            for msg in self._consumer.consume(100, 0.2):
                if msg.error() is not None:
                    continue
                task = json.loads(msg.value())
                self.seen.append(task)
                answer = self.policy(task)
                if answer is not None:
                    outcome, fields = answer
                    self._feed.result(task, outcome, **fields)
