"""The Faust engine's view of a broker outage from aiokafka's log lines (no broker, no Faust)."""

from __future__ import annotations

import logging

import pytest

from streams.coordinator.faust.brokers import OutageLogFilter, say_waiting, unreachable
from streams.kafka.reachability import BrokerWatch

CONNECT = "Unable connect to node with id %s: %s"


class KafkaConnectionError(Exception):  # named like aiokafka's
    pass


def _record(msg: str, *args: object, name: str = "aiokafka") -> logging.LogRecord:
    return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, args, None)


def test_the_lines_of_a_gone_broker_are_told_from_the_others() -> None:
    assert unreachable(_record("Unable connect to node with id %s: %s", 1, OSError(111)))
    assert unreachable(_record("Unable to update metadata from %s", [1]))
    conn = KafkaConnectionError("Connection at 127.0.0.1:9092 closed")
    assert unreachable(_record("Failed fetch messages from %s: %s", 1, conn))
    assert unreachable(_record("Some new wording: %s", conn))  # by the error's kind
    assert not unreachable(_record("OffsetCommit failed for unauthorized topics %s", ["x"]))
    assert not unreachable(_record("Heartbeat failed for group %s because it is rebalancing", "g"))


def test_an_outage_is_one_wait_one_line_a_minute_and_a_warning_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """aiokafka logged 11,678 lines (about 120 a second) for a 90 s outage of the only broker;
    through the filter that is one line of aiokafka's a minute, the coordinator's WARNING a
    minute with how long it has waited, and one line when the brokers are back."""
    now = [0]
    watch = BrokerWatch(quiet_ms=10_000)
    gate = OutageLogFilter(watch, now_ms=lambda: now[0])
    names = ("aiokafka", "aiokafka.consumer.fetcher")
    gate.install(names)
    log = logging.getLogger("streams.coordinator")
    try:
        with caplog.at_level(logging.INFO):
            for t in range(0, 150_000, 10):  # 100 failed attempts a second for 150 s
                now[0] = t
                refused = OSError(111, "Connect call failed")
                logging.getLogger(names[t % 2]).error(CONNECT, 1, refused)
                if t % 1000 == 0:  # the coordinator's tick
                    say_waiting(watch, log, t)
                    logging.getLogger("aiokafka").warning(
                        "Heartbeat failed for group %s because it is rebalancing", "g"
                    )
            health = watch.health(150_000)
            for t in range(150_000, 170_000, 1000):  # back: no failure any more
                say_waiting(watch, log, t)
    finally:
        gate.uninstall(names)
    lines = [r.getMessage() for r in caplog.records if "rebalancing" not in r.getMessage()]
    assert lines == [
        "Unable connect to node with id 1: [Errno 111] Connect call failed",
        "Unable connect to node with id 1: [Errno 111] Connect call failed (and 5999 such lines "
        "in the last minute)",
        "waiting for the Kafka brokers for 60 s (6001 failed attempts); last error: Unable "
        "connect to node with id 1: [Errno 111] Connect call failed; aiokafka goes on retrying",
        "Unable connect to node with id 1: [Errno 111] Connect call failed (and 5999 such lines "
        "in the last minute)",
        "waiting for the Kafka brokers for 120 s (12001 failed attempts); last error: Unable "
        "connect to node with id 1: [Errno 111] Connect call failed; aiokafka goes on retrying",
        "Kafka brokers answer again after 160 s",
    ]
    # the other lines of aiokafka pass as they are
    assert sum("rebalancing" in r.getMessage() for r in caplog.records) == 150
    assert health["kafka"] == "waiting_for_brokers" and health["kafka_waiting_since_ms"] == 0


def test_an_app_built_again_replaces_the_filter() -> None:
    names = ("aiokafka.test-only",)
    first = OutageLogFilter(BrokerWatch()).install(names)
    second = OutageLogFilter(BrokerWatch()).install(names)
    try:
        assert logging.getLogger(names[0]).filters == [second]
    finally:
        first.uninstall(names)
        second.uninstall(names)
