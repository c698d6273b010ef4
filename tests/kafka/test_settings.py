"""Every librdkafka client keeps to the brokers it knows when the cluster is unreachable."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from streams.kafka.settings import METADATA_RECOVERY, KafkaSettings


def test_every_client_config_turns_re_bootstrapping_off_and_librdkafka_accepts_it() -> None:
    settings = KafkaSettings("127.0.0.1:1", {"client.id": "settings-test"})
    consumer = settings.consumer(**{"group.id": "g"})
    producer = settings.producer(**{"transactional.id": "t"})
    admin = settings.librdkafka()
    for config in (consumer, producer, admin):
        assert config["metadata.recovery.strategy"] == METADATA_RECOVERY == "none"
    # librdkafka validates the configuration when a client is made (no broker is contacted).
    Consumer(consumer).close()
    Producer(producer).flush(0)
    AdminClient(admin)


def test_a_caller_may_still_choose_re_bootstrapping() -> None:
    config = KafkaSettings().librdkafka(**{"metadata.recovery.strategy": "rebootstrap"})
    assert config["metadata.recovery.strategy"] == "rebootstrap"
