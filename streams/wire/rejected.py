"""The `rejected` topic: an invalid input with its reason, keyed by the input's raw key."""

from __future__ import annotations

import json

from pydantic import Field

from streams.wire.base import Wire, validated

MAX_RAW_BYTES = 4096


class RejectedMessage(Wire):
    source_topic: str
    partition: int
    offset: int
    reason: str
    key: str | None
    value: str | None = Field(description=f"the raw value, cut to {MAX_RAW_BYTES} bytes")


def decode_rejected(raw: bytes | None) -> RejectedMessage:
    """A `rejected` value, or InvalidInput naming the field."""
    return validated(RejectedMessage.model_validate_json, raw)


def rejected_value(
    topic: str, partition: int, offset: int, reason: str, key: bytes | None, value: bytes | None
) -> bytes:
    """The `rejected` record for an input, with the raw key and value cut to 4 KiB."""

    def text(raw: bytes | None) -> str | None:
        return None if raw is None else raw[:MAX_RAW_BYTES].decode("utf-8", "replace")

    return json.dumps(
        {
            "source_topic": topic,
            "partition": partition,
            "offset": offset,
            "reason": reason,
            "key": text(key),
            "value": text(value),
        }
    ).encode()
