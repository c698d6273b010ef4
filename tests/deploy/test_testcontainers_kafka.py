"""The path users with Docker take to test a pipeline: Kafka in a container started by
testcontainers (the local stand-in for apache/kafka here, the same image as the compose test),
and a Tidemark worker against it answering a task.

The same helper runs the whole broker suite on a container when TIDEMARK_TEST_KAFKA_IMAGE names
an image (tests/support/broker.py). `make test-docker`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streams.dev.docker import LocalImages
from streams.kafka.settings import KafkaSettings
from tests.support.broker import kafka_container
from tests.worker.kafka_helpers import for_task, make_task, send, synthetic_worker

pytestmark = [pytest.mark.docker]


@pytest.fixture(scope="module")
def kafka_in_container(local_images: LocalImages) -> Iterator[KafkaSettings]:
    with kafka_container(local_images.kafka) as bootstrap:
        yield KafkaSettings(bootstrap)


def test_a_worker_answers_a_task_through_kafka_in_a_container(
    kafka_in_container: KafkaSettings,
) -> None:
    kafka = kafka_in_container
    with synthetic_worker(kafka, "tc") as (runtime, reader):
        sent = [make_task(f"tc-{i}", i, timeout_ms=600_000) for i in range(5)]
        send(kafka, "tc.tasks", *sent)
        for task in sent:
            reader.wait_for(f"the ack of {task.task_id}", for_task(task, "ack"), timeout_s=90)
        assert not runtime.failed and not runtime.join(0), "the worker stopped"
