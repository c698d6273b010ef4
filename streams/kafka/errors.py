"""Kafka's errors translated to Tidemark's, in one place: every adapter under streams/kafka uses it.

``broker_errors("what was tried")`` is a context manager and a decorator: a ``KafkaException``,
or a timeout of one of the client's futures, leaves it as ``BrokerUnavailable`` naming what was
tried, with the cause kept (``raise ... from``). ``describe`` and ``is_fatal`` classify the
``KafkaError`` values that callbacks receive, for the adapters that log them.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from confluent_kafka import KafkaError, KafkaException

from streams.errors import BrokerUnavailable

Severity = Literal["fatal", "unreachable", "transport", "missing_topic", "other"]


@contextmanager
def broker_errors(what: str) -> Iterator[None]:
    """Raise what Kafka raises inside as ``BrokerUnavailable(f"{what}: {cause}")``."""
    try:
        yield
    except (KafkaException, TimeoutError, concurrent.futures.TimeoutError) as exc:
        raise BrokerUnavailable(f"{what}: {exc}") from exc


def error_code(exc: KafkaException) -> int | None:
    """The ``KafkaError`` code a ``KafkaException`` carries, if it carries one."""
    error = exc.args[0] if exc.args else None
    return error.code() if isinstance(error, KafkaError) else None


def severity(error: KafkaError) -> Severity:
    """How bad a ``KafkaError`` from a callback or a polled message is.

    ``fatal``: the client cannot go on (e.g. a fenced idempotent producer); ``unreachable``: no
    broker answers (librdkafka retries with backoff); ``transport``: one connection failed
    (librdkafka logs it already); ``missing_topic``: the topic does not exist (yet).
    """
    if error.fatal():
        return "fatal"
    code = error.code()
    if code == KafkaError._ALL_BROKERS_DOWN:
        return "unreachable"
    if code == KafkaError._TRANSPORT:
        return "transport"
    if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return "missing_topic"
    return "other"
