"""`watermarks` asks again while a topic just created has no leader yet, in each of the forms
librdkafka reports it, and gives up on anything else at once."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from streams.kafka.topic_io import watermarks


class _Admin:
    """An admin client whose ListOffsets fails `failures` times with `code`, then answers."""

    def __init__(self, code: int, failures: int) -> None:
        self.code, self.failures, self.calls = code, failures, 0

    def list_topics(self, timeout: float) -> Any:
        topic = SimpleNamespace(error=None, partitions={0: None})
        return SimpleNamespace(topics={"t": topic})

    def list_offsets(self, request: dict[TopicPartition, Any], **_: Any) -> dict[Any, Any]:
        self.calls += 1
        if self.calls <= 2 * self.failures:  # earliest and latest are two calls
            raise KafkaException(KafkaError(self.code, "Failed to query partition leaders"))
        out: dict[Any, Any] = {}
        for tp in request:
            done: Future[Any] = Future()
            done.set_result(SimpleNamespace(offset=5))
            out[tp] = done
        return out


@pytest.mark.parametrize(
    "code",
    [
        KafkaError._NOENT,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.UNKNOWN_LEADER_EPOCH,
    ],
)
def test_no_leader_yet_is_asked_again(code: int) -> None:
    admin = _Admin(code, failures=2)
    assert watermarks(admin, ["t"], timeout_s=5) == {("t", 0): (5, 5)}  # type: ignore[arg-type]
    assert admin.calls >= 3


def test_another_error_is_raised_at_once() -> None:
    admin = _Admin(KafkaError._AUTHENTICATION, failures=1)
    with pytest.raises(KafkaException):
        watermarks(admin, ["t"], timeout_s=5)  # type: ignore[arg-type]
    assert admin.calls == 1
