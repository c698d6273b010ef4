"""An asyncio-friendly confluent-kafka producer for the coordinator's output topics.

librdkafka produces from C, about ten times cheaper per message than the pure-Python path
through Faust and aiokafka; the coordinator's hot path sends a task and often a commit per
input, so its outputs go here. Delivery callbacks are handed back to the event loop, and
`flush()` runs in a thread so that the loop (and the group heartbeat) keeps going.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, Producer

from streams.errors import BrokerUnavailable
from streams.kafka.settings import KafkaSettings

log = logging.getLogger("streams.kafka")


class KafkaOutput:
    def __init__(self, settings: KafkaSettings, linger_ms: int = 2) -> None:
        self._producer = Producer(
            settings.producer(
                **{
                    "linger.ms": linger_ms,
                    "enable.idempotence": True,  # no duplicates or reordering on retries
                    "acks": "all",
                    "error_cb": self._on_error,
                }
            )
        )
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
        broker has it (or the producer gave it up)."""
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

        while True:
            try:
                self._producer.produce(topic, value, key, on_delivery=delivery)
                return
            except BufferError:  # the local queue is full: let deliveries drain it
                self._producer.poll(0.05)

    def poll(self) -> None:
        """Serve delivery callbacks without blocking."""
        self._producer.poll(0)

    async def flush(self, timeout_s: float = 30) -> None:
        """Wait until everything queued is delivered (called before offsets are committed)."""
        loop = asyncio.get_running_loop()
        left = await loop.run_in_executor(None, self._producer.flush, timeout_s)
        if left:
            raise BrokerUnavailable(f"{left} output messages undelivered after {timeout_s:g} s")
