"""Tidemark's exceptions: one root, and a few meaningful children."""

from __future__ import annotations


class TidemarkError(Exception):
    """The root of every error that Tidemark raises on purpose."""


class InvalidInput(TidemarkError):
    """An input (a config, a stored state, a wire message) broke a rule.

    `field` names where (nested fields are dotted, like `retry.interval_ms`) and `reason` says why.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(field, reason)
        self.field = field
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


class BrokerUnavailable(TidemarkError):
    """The Kafka cluster cannot be reached, or refused an operation."""
