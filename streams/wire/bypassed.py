"""The `bypassed` topic (compacted): a bypassed window's record, keyed by `bypassed_key`."""

from __future__ import annotations

from typing import NamedTuple

import orjson
from pydantic import Field, ValidationError

from streams.core import BypassRecord, ErrorInfo, bypass_key
from streams.errors import InvalidInput
from streams.wire.base import ErrorModel, Ms, StreamId, Wire, reason


class BypassedMessage(Wire):
    stream_id: StreamId
    start_ms: Ms
    end_ms: Ms
    attempts: int = Field(
        ge=0,
        description=(
            "failed attempts (nacks and timeouts, not shutdowns; a committed window's attempts "
            "counts dispatches instead)"
        ),
    )
    first_failed_ms: Ms
    bypassed_ms: Ms
    last_error: ErrorModel | None


def bypassed_key(stream_id: str, start_ms: int) -> bytes:
    """The (compacted) `bypassed` key of a window: `{stream_id}/{start_ms}` as UTF-8."""
    return bypass_key(stream_id, start_ms).encode()


def encode_bypassed(record: BypassRecord) -> bytes:
    """The `bypassed` value of `record`, keyed by `bypassed_key`; `decode_bypassed` inverts it."""
    return orjson.dumps(record.to_wire())


class Bypassed(NamedTuple):
    """A decoded `bypassed` record: the window its key names, and its value (None: a tombstone)."""

    stream_id: str
    start_ms: int
    record: BypassRecord | None


def decode_bypassed(key: bytes | None, raw: bytes | None) -> Bypassed:
    """A `bypassed` record (a tombstone has no value), or InvalidInput naming the field.

    The key must be `{stream_id}/{start_ms}`, of the value's stream and window when there is one.
    """
    if key is None:
        raise InvalidInput("key", "is required")
    try:
        text = key.decode()
    except UnicodeDecodeError:
        raise InvalidInput("key", "is not UTF-8") from None
    stream_id, _, start = text.rpartition("/")
    if not stream_id or not start.isdigit():
        raise InvalidInput("key", "must be {stream_id}/{start_ms}")
    if raw is None:
        return Bypassed(stream_id, int(start), None)
    try:
        msg = BypassedMessage.model_validate_json(raw)
    except ValidationError as exc:
        raise reason(exc) from None
    if text != bypass_key(msg.stream_id, msg.start_ms):
        raise InvalidInput("key", "must be the value's {stream_id}/{start_ms}")
    error = msg.last_error
    record = BypassRecord(
        msg.stream_id,
        msg.start_ms,
        msg.end_ms,
        msg.attempts,
        msg.first_failed_ms,
        msg.bypassed_ms,
        None if error is None else ErrorInfo(error.kind, error.message),
    )
    return Bypassed(msg.stream_id, msg.start_ms, record)
