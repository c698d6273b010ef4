"""A transactional producer and a group consumer, configured as Tidemark configures them,
commit transactions with offsets across broker restarts (run by test_broker_restart.py).

It runs in a process of its own: the hang it checks for is inside a librdkafka call, where no
Python timeout reaches, so the test bounds it from outside. Each transaction after a restart
must end within CALL_DEADLINE_S; every call is made with a 1 s timeout and retried, as the
coordinator's loop does. Prints one line per transaction; exits 0 when all of them committed.

    python -m tests.kafka.txn_across_restart HOME [--restarts N] [--strategy none|rebootstrap]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from streams.devbroker import ephemeral_broker
from streams.kafka.admin import TopicSpec, create_topics
from streams.kafka.settings import METADATA_RECOVERY

CALL_DEADLINE_S = 30.0
TRANSACTIONS_PER_ROUND = 3


def _call(what: str, call: Callable[[float], Any]) -> float:
    """Call with 1 s timeouts until it succeeds; return how long the longest single call took."""
    deadline = time.monotonic() + CALL_DEADLINE_S
    longest_s = 0.0
    while True:
        began = time.monotonic()
        try:
            call(1.0)
            return max(longest_s, time.monotonic() - began)
        except KafkaException as exc:
            longest_s = max(longest_s, time.monotonic() - began)
            err: KafkaError = exc.args[0]
            retriable = err.retriable() or err.code() == KafkaError._TIMED_OUT
            if not retriable or time.monotonic() > deadline:
                raise SystemExit(f"{what}: {err.str()} after {longest_s:.1f} s") from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("home", type=Path)
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--strategy", default=METADATA_RECOVERY)
    args = parser.parse_args(argv)
    broker = ephemeral_broker(args.home)
    broker.start()
    try:
        settings = broker.settings
        create_topics(settings, [TopicSpec("in", 3), TopicSpec("out", 3)])
        recovery = {"metadata.recovery.strategy": args.strategy}
        consumer = Consumer(settings.consumer(**{"group.id": "g", **recovery}))
        producer = Producer(settings.producer(**{"transactional.id": "t", **recovery}))
        consumer.subscribe(["in"])
        producer.init_transactions(30)
        while not consumer.assignment():
            consumer.poll(0.2)
        offset = 0

        def transaction(label: str) -> None:
            nonlocal offset
            offset += 1
            began = time.monotonic()
            producer.begin_transaction()
            producer.produce("out", b"value", b"key")
            tps = [TopicPartition("in", 0, offset)]
            metadata = consumer.consumer_group_metadata()
            longest_s = _call(
                "send_offsets_to_transaction",
                lambda t: producer.send_offsets_to_transaction(tps, metadata, t),
            )
            longest_s = max(longest_s, _call("commit_transaction", producer.commit_transaction))
            consumer.poll(0)
            took_s = time.monotonic() - began
            print(f"{label}: committed in {took_s:.1f} s, longest call {longest_s:.1f} s")
            sys.stdout.flush()

        for i in range(TRANSACTIONS_PER_ROUND):
            transaction(f"before any restart, transaction {i}")
        for r in range(args.restarts):
            broker.stop()
            time.sleep(3)  # long enough for every client to see every broker down
            broker.start()
            for i in range(TRANSACTIONS_PER_ROUND):
                transaction(f"after restart {r + 1}, transaction {i}")
        consumer.close()
        producer.flush(10)
        print("all committed")
        return 0
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
