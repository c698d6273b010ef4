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
from streams.kafka.admin import create_topics
from streams.kafka.settings import KafkaSettings
from streams.pipelines.synthetic import SyntheticPipeline
from streams.topics import TopicSpec
from streams.worker.config import WorkerConfig
from streams.worker.runner import kafka_runtime
from tests.support.broker import kafka_container
from tests.worker.kafka_helpers import PARTITIONS, ResultReader, for_task, make_task, send

pytestmark = [pytest.mark.docker]


@pytest.fixture(scope="module")
def kafka_in_container(local_images: LocalImages) -> Iterator[KafkaSettings]:
    with kafka_container(local_images.kafka) as bootstrap:
        yield KafkaSettings(bootstrap)


def test_a_worker_answers_a_task_through_kafka_in_a_container(
    kafka_in_container: KafkaSettings,
) -> None:
    kafka, prefix = kafka_in_container, "tc"
    tasks, results = f"{prefix}.tasks", f"{prefix}.results"
    create_topics(kafka, [TopicSpec(tasks, PARTITIONS), TopicSpec(results, PARTITIONS)])
    reader = ResultReader(kafka, results)
    config = WorkerConfig("synthetic", topic_prefix=prefix, concurrency=2)
    runtime = kafka_runtime(kafka, SyntheticPipeline(latency_ms=10), config)
    runtime.start()
    try:
        sent = [make_task(f"tc-{i}", i, timeout_ms=600_000) for i in range(5)]
        send(kafka, tasks, *sent)
        for task in sent:
            reader.wait_for(f"the ack of {task.task_id}", for_task(task, "ack"), timeout_s=90)
        assert not runtime.failed and not runtime.join(0), "the worker stopped"
    finally:
        runtime.stop()
        runtime.join(30)
        reader.close()
