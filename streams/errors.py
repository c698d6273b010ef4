"""Tidemark's exceptions: one root, a few meaningful children."""

from __future__ import annotations


class TidemarkError(Exception):
    """The root of every error Tidemark raises on purpose."""


class InvalidInput(TidemarkError):
    """An input (config, wire event, CLI argument) is invalid; names the field and the reason."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class BrokerUnavailable(TidemarkError):
    """The Kafka cluster cannot be reached or refused an operation."""
