"""Handlers for the worker benchmark, run as ``--pipeline bench_handlers:<factory>``."""

from __future__ import annotations

import asyncio

from streams.handler import Ack, Outcome, Task


class AsyncSleep:
    """An I/O-bound coroutine handler: waits ``latency_ms`` without a thread, then acks."""

    def __init__(self, *, latency_ms: int = 50) -> None:
        self._latency_s = latency_ms / 1000

    async def __call__(self, task: Task) -> Outcome:
        await asyncio.sleep(self._latency_s)
        return Ack(task.end_ms)
