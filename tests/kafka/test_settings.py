"""Every librdkafka client keeps to the brokers it knows when the cluster is unreachable."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from streams.kafka.settings import METADATA_RECOVERY, KafkaSettings, group_protocol_from_env
from streams.kafka.transactions import TransactionalClients
from streams.kafka.worker_io import consumer_config
from streams.worker.config import WorkerConfig


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


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_the_group_clients_configs_are_accepted_by_librdkafka_under_each_group_protocol(
    protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KIP-848: with TIDEMARK_GROUP_PROTOCOL=consumer the coordinators' and the workers'
    consumers join with `group.protocol=consumer` and the broker's assignor (range for the
    coordinators: control[p] and results[p] on one member); librdkafka refuses the classic
    client-side assignor and timeouts there, so a consumer made from the config proves it."""
    monkeypatch.setenv("TIDEMARK_GROUP_PROTOCOL", protocol)
    settings = KafkaSettings("127.0.0.1:1")
    clients = TransactionalClients(settings, "g", "t", session_timeout_ms=10_000)
    worker = consumer_config(settings, WorkerConfig(pipeline="p", topic_prefix="x"))
    try:
        made = clients._consumer  # made from its config: librdkafka accepted it
        assert made is not None
    finally:
        clients.close()
    Consumer(worker).close()
    if protocol == "consumer":
        assert worker["group.protocol"] == "consumer"
        assert worker["group.remote.assignor"] == "uniform"
        assert "session.timeout.ms" not in worker
    else:
        assert "group.protocol" not in worker
        assert worker["partition.assignment.strategy"] == "cooperative-sticky"
        assert worker["session.timeout.ms"] == 10_000


def test_an_unknown_group_protocol_is_refused() -> None:
    with pytest.raises(ValueError, match="TIDEMARK_GROUP_PROTOCOL"):
        group_protocol_from_env({"TIDEMARK_GROUP_PROTOCOL": "eager"})
    assert group_protocol_from_env({}) == "classic"
