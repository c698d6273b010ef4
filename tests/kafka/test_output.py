"""KafkaOutput.send against a fake producer: a full queue is waited on, but not forever."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streams.errors import BrokerUnavailable
from streams.kafka.output import KafkaOutput


class FakeProducer:
    """Raises BufferError for the first `full_for` produce calls; each poll advances the clock."""

    def __init__(self, clock: list[float], full_for: int) -> None:
        self.clock = clock
        self.full_for = full_for
        self.produced: list[tuple[str, bytes | None, bytes]] = []
        self.polls = 0

    def produce(self, topic: str, value: bytes | None, key: bytes, on_delivery: Any) -> None:
        if self.full_for > 0:
            self.full_for -= 1
            raise BufferError("Local: Queue full")
        self.produced.append((topic, value, key))

    def poll(self, timeout: float) -> int:
        self.polls += 1
        self.clock[0] += timeout
        return 0

    def flush(self, timeout: float) -> int:
        return 0


def _output(producer: FakeProducer, clock: list[float], timeout_s: float) -> KafkaOutput:
    return KafkaOutput(
        None, producer=producer, queue_full_timeout_s=timeout_s, monotonic_s=lambda: clock[0]
    )


def test_a_queue_full_for_a_while_is_waited_on() -> None:
    clock = [100.0]
    producer = FakeProducer(clock, full_for=5)
    output = _output(producer, clock, timeout_s=1.0)

    async def main() -> None:
        output.send("t", b"k", b"v")

    asyncio.run(main())
    assert producer.produced == [("t", b"v", b"k")]
    assert producer.polls == 5


def test_a_queue_that_stays_full_raises_broker_unavailable_within_the_bound() -> None:
    clock = [100.0]
    producer = FakeProducer(clock, full_for=10**9)
    output = _output(producer, clock, timeout_s=2.0)

    async def main() -> None:
        output.send("tidemark.tasks", b"k", b"v")

    with pytest.raises(BrokerUnavailable, match=r"queue stayed full for 2 s.*tidemark\.tasks"):
        asyncio.run(main())
    assert producer.produced == []
    # It gave up once the bound passed (each poll is 0.05 s of the fake clock), not much later.
    assert 2.0 <= clock[0] - 100.0 <= 2.1
