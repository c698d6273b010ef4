"""An asyncio-friendly confluent-kafka producer for the coordinator's output topics.

librdkafka produces from C, about ten times cheaper per message than the pure-Python path
through Faust and aiokafka; the coordinator's hot path sends a task and often a commit per
input, so its outputs go here. Delivery callbacks are handed back to the event loop, and
`flush()` runs in a thread so that the loop (and the group heartbeat) keeps going.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

from confluent_kafka import KafkaError, Producer

from streams.errors import BrokerUnavailable
from streams.kafka.settings import KafkaSettings

log = logging.getLogger("streams.kafka")

# How long `send` waits for room in a full local queue before it gives up: it runs on the event
# loop, so a broker that stalls must not block the loop (and the group's heartbeats) for long.
QUEUE_FULL_TIMEOUT_S = 10.0


class _Producer(Protocol):
    """What KafkaOutput uses of confluent_kafka.Producer (a test passes a fake)."""

    def produce(self, topic: str, value: bytes | None, key: bytes, on_delivery: Any) -> None: ...
    def poll(self, timeout: float) -> int: ...
    def flush(self, timeout: float) -> int: ...


class KafkaOutput:
    def __init__(
        self,
        settings: KafkaSettings | None,
        linger_ms: int = 2,
        *,
        producer: _Producer | None = None,
        queue_full_timeout_s: float = QUEUE_FULL_TIMEOUT_S,
        monotonic_s: Callable[[], float] = time.monotonic,
    ) -> None:
        """Over `settings` (or `producer`, already made: tests pass a fake and no settings)."""
        if producer is None:
            if settings is None:
                raise ValueError("KafkaOutput needs settings or a producer")
            real = Producer(
                settings.producer(
                    **{
                        "linger.ms": linger_ms,
                        "enable.idempotence": True,  # no duplicates or reordering on retries
                        "acks": "all",
                        "error_cb": self._on_error,
                    }
                )
            )
            producer = cast(_Producer, real)
        self._producer: _Producer = producer
        self._queue_full_timeout_s = queue_full_timeout_s
        self._monotonic_s = monotonic_s
        self._loop: asyncio.AbstractEventLoop | None = None

    @staticmethod
    def _on_error(err: KafkaError) -> None:
        log.error("output producer: %s", err)

    def send(
        self,
        topic: str,
        key: bytes,
        value: bytes | None,
        on_delivered: Callable[[], None] | None = None,
        on_failed: Callable[[], None] | None = None,
    ) -> None:
        """Queue one message; `on_delivered` (or `on_failed`) runs on the event loop once the
        broker has it (or the producer gave it up).

        While the local queue is full, deliveries are served until there is room; after
        `queue_full_timeout_s` without room the broker is taken as stalled: BrokerUnavailable.
        """
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        loop = self._loop

        def delivery(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                log.error("could not deliver to %s: %s", topic, err)
                if on_failed is not None:
                    loop.call_soon_threadsafe(on_failed)
            elif on_delivered is not None:
                loop.call_soon_threadsafe(on_delivered)

        producer = self._producer
        try:
            producer.produce(topic, value, key, on_delivery=delivery)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            pass
        give_up_s = self._monotonic_s() + self._queue_full_timeout_s
        while True:
            producer.poll(0.05)
            try:
                producer.produce(topic, value, key, on_delivery=delivery)
                return
            except BufferError as exc:
                if self._monotonic_s() >= give_up_s:
                    raise BrokerUnavailable(
                        f"output producer: the local queue stayed full for "
                        f"{self._queue_full_timeout_s:g} s (the broker takes no messages); "
                        f"a message to {topic} was not sent"
                    ) from exc

    def poll(self) -> None:
        """Serve delivery callbacks without blocking."""
        self._producer.poll(0)

    async def flush(self, timeout_s: float = 30) -> None:
        """Wait until everything queued is delivered (called before offsets are committed)."""
        loop = asyncio.get_running_loop()
        left = await loop.run_in_executor(None, self._producer.flush, timeout_s)
        if left:
            raise BrokerUnavailable(f"{left} output messages undelivered after {timeout_s:g} s")
