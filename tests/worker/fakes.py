"""The worker's in-memory fakes, shipped in the test kit (``streams.testing``); the names the
worker tests have always used."""

from __future__ import annotations

from streams.testing.fakes import (
    TASKS,
    HeldExecutor,
    InMemoryResultSink,
    InMemoryTaskSource,
    Sent,
)
from streams.testing.worker import InProcessWorker as Worker

__all__ = [
    "TASKS",
    "HeldExecutor",
    "InMemoryResultSink",
    "InMemoryTaskSource",
    "Sent",
    "Worker",
]
