"""Topic creation without a broker: a request lost in flight is sent again."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from streams.errors import BrokerUnavailable
from streams.kafka.admin import create_topics
from streams.kafka.settings import KafkaSettings
from streams.topics import TopicSpec

SETTINGS = KafkaSettings("127.0.0.1:9")


class LossyAdmin:
    """Answers each topic's first CreateTopics with `first`, later ones with success."""

    def __init__(self, first: int, existing: frozenset[str] = frozenset()) -> None:
        self.first, self.existing = first, existing
        self.asked: list[list[str]] = []

    def create_topics(self, new: list[Any], request_timeout: float) -> dict[str, Future[None]]:
        self.asked.append([t.topic for t in new])
        answers = {}
        for topic in new:
            future: Future[None] = Future()
            if topic.topic in self.existing:
                future.set_exception(KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS)))
            elif len(self.asked) == 1 and topic.topic == "b":
                future.set_exception(KafkaException(KafkaError(self.first)))
            else:
                future.set_result(None)
            answers[topic.topic] = future
        return answers


def specs(*names: str) -> list[TopicSpec]:
    return [TopicSpec(name, 1, replication=1) for name in names]


def test_a_create_request_lost_with_its_broker_handle_is_sent_again() -> None:
    # Seen right after a three-node cluster started: librdkafka replaced the bootstrap handle
    # the request went to, and the topic's answer was _DESTROY_BROKER.
    admin = LossyAdmin(KafkaError._DESTROY_BROKER, existing=frozenset({"c"}))
    created = create_topics(SETTINGS, specs("a", "b", "c"), admin=admin)  # type: ignore[arg-type]
    assert sorted(created) == ["a", "b"]
    assert admin.asked == [["a", "b", "c"], ["b"]]


def test_a_refused_create_is_an_error_at_once() -> None:
    admin = LossyAdmin(KafkaError.INVALID_REPLICATION_FACTOR)
    with pytest.raises(BrokerUnavailable, match="could not create topic b"):
        create_topics(SETTINGS, specs("a", "b"), admin=admin)  # type: ignore[arg-type]
    assert len(admin.asked) == 1
