"""The handler API under its first name: ``streams.handler`` holds it, this re-exports it."""

from __future__ import annotations

from streams.handler import (
    BAD_PARAMS,
    CORE_METRIC,
    EXPORT,
    HANDLER_ERROR,
    NO_DATA,
    OUTAGE,
    RESERVED_KINDS,
    SHUTDOWN,
    SYNTHETIC_FAILURE,
    TIMEOUT,
    Ack,
    AnyHandler,
    AsyncHandler,
    Handler,
    HandlerKind,
    Nack,
    Outcome,
    Task,
    handler_kind,
)

__all__ = [
    "BAD_PARAMS",
    "CORE_METRIC",
    "EXPORT",
    "HANDLER_ERROR",
    "NO_DATA",
    "OUTAGE",
    "RESERVED_KINDS",
    "SHUTDOWN",
    "SYNTHETIC_FAILURE",
    "TIMEOUT",
    "Ack",
    "AnyHandler",
    "AsyncHandler",
    "Handler",
    "HandlerKind",
    "Nack",
    "Outcome",
    "Task",
    "handler_kind",
]
