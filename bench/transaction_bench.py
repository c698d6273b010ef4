"""What one Kafka transaction costs a confluent-kafka producer on this broker, step by step.

The confluent engine commits a transaction per step under light load: produce, then
`send_offsets_to_transaction`, then `commit_transaction`, which flushes the outputs first.
This times each over `--transactions` transactions of `--messages` records over 6 partitions,
with the next transaction begun at once after the commit (as the engine may) and `--gap-ms`
later, in three ways: the engine's order and backoff, the same with librdkafka's default
`retry.backoff.ms` (100), and the order it had before (an explicit `flush()` first).

A transaction begun at once pays for its predecessor: the broker's transaction coordinator
answers the commit before it has written the commit markers, and until it has, the next
transaction's AddPartitionsToTxn and AddOffsetsToTxn are refused with CONCURRENT_TRANSACTIONS.
librdkafka retries the first 20 ms later, the second after `retry.backoff.ms`. (Kafka 4.0's
transactions v2, KIP-890 part 2, drops AddPartitionsToTxn; this broker is 3.9.)

    .venv/bin/python bench/transaction_bench.py [--transactions 200] [--messages 200]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from common import broker_for_run, pct
from confluent_kafka import Consumer, Producer, TopicPartition

from streams.kafka.admin import create_topics
from streams.kafka.settings import KafkaSettings
from streams.topics import TopicSpec

PARTITIONS = 6


# (label, flush before sending the offsets, retry.backoff.ms or None for librdkafka's 100)
ORDERS = (
    ("flush, offsets, commit; retry.backoff.ms 100", True, None),
    ("offsets, commit (it flushes); retry.backoff.ms 100", False, None),
    ("offsets, commit (it flushes); retry.backoff.ms 10 (the engine)", False, 10),
)


def run(
    kafka: KafkaSettings,
    transactions: int,
    messages: int,
    gap_s: float,
    flush_first: bool,
    retry_backoff_ms: int | None,
) -> dict[str, list]:
    tag = uuid.uuid4().hex[:6]
    out, inp = f"bench-txn-out-{tag}", f"bench-txn-in-{tag}"
    create_topics(kafka, [TopicSpec(out, PARTITIONS), TopicSpec(inp, PARTITIONS)])
    extra = {} if retry_backoff_ms is None else {"retry.backoff.ms": retry_backoff_ms}
    producer = Producer(
        kafka.producer(**{"transactional.id": f"bench-{tag}", "linger.ms": 5, **extra})
    )
    group = Consumer(kafka.librdkafka(**{"group.id": f"bench-txn-{tag}",
                                         "enable.auto.commit": False}))  # fmt: skip
    group.subscribe([inp])
    group.poll(1.0)  # joins the group: offsets go with its metadata
    producer.init_transactions(30)
    steps: dict[str, list] = {"flush": [], "send_offsets": [], "commit": [], "in all": []}
    offsets = [TopicPartition(inp, p, 0) for p in range(PARTITIONS)]
    for i in range(transactions):
        time.sleep(gap_s)
        producer.begin_transaction()
        for k in range(messages):
            producer.produce(out, b"x" * 100, str(k).encode(), partition=k % PARTITIONS)
        began = time.perf_counter()
        if flush_first:
            producer.flush(30)
        flushed = time.perf_counter()
        producer.send_offsets_to_transaction(offsets, group.consumer_group_metadata(), 30)
        sent = time.perf_counter()
        producer.commit_transaction(30)
        done = time.perf_counter()
        if flush_first:
            steps["flush"].append((flushed - began) * 1000)
        steps["send_offsets"].append((sent - flushed) * 1000)
        steps["commit"].append((done - sent) * 1000)
        steps["in all"].append((done - began) * 1000)
        if (i + 1) % 50 == 0:
            print(f"  {i + 1}/{transactions} transactions", flush=True)
    group.close()
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--gap-ms", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, broker_for_run(Path(tmp)) as kafka:
        for label, gap_s in (("at once", 0.0), (f"{args.gap_ms:g} ms later", args.gap_ms / 1000)):
            for order, flush_first, backoff_ms in ORDERS:
                print(f"next transaction begun {label}; {order}:", flush=True)
                steps = run(kafka, args.transactions, args.messages, gap_s, flush_first, backoff_ms)
                for name, values in steps.items():
                    if values:
                        print(
                            f"  {name:<13} p50 {pct(values, 0.5):6.1f} ms   "
                            f"p99 {pct(values, 0.99):6.1f} ms"
                        )


if __name__ == "__main__":
    main()
