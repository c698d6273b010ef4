"""The coordinator's transactional clients commit transactions with offsets across broker
restarts (run by test_broker_restart.py).

It runs in a process of its own: the hang it checks for is inside a librdkafka call, where no
Python timeout reaches, so the test bounds it from outside. Prints one line per transaction;
exits 0 when all of them committed, non-zero with the reason when one was aborted or fatal.

    python -m tests.kafka.txn_across_restart HOME [--restarts N] [--strategy none|rebootstrap]

`--strategy rebootstrap` puts back librdkafka's default, to show the hang the setting avoids.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from streams.coordinator.confluent.pacing import AbortStreak
from streams.dev.broker import ephemeral_broker
from streams.errors import TidemarkError
from streams.kafka import settings as kafka_settings
from streams.kafka.admin import create_topics
from streams.kafka.transactions import TransactionAborted, TransactionalClients
from streams.topics import TopicSpec

TRANSACTIONS_PER_ROUND = 3
# After this long of aborts the clients are made anew, as the engine renews them (by the
# engine's own rule, AbortStreak, shortened): the consumer can stay out of its group for good.
# A transaction fails once new clients abort for as long again.
NEW_CLIENTS_AFTER_S = 15.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("home", type=Path)
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--strategy", default=kafka_settings.METADATA_RECOVERY)
    args = parser.parse_args(argv)
    kafka_settings.METADATA_RECOVERY = args.strategy  # read when each client's config is made
    broker = ephemeral_broker(args.home)
    broker.start()
    try:
        create_topics(broker.settings, [TopicSpec("in", 3), TopicSpec("out", 3)])

        def new_clients() -> TransactionalClients:
            made = TransactionalClients(broker.settings, "g", "t", session_timeout_ms=10_000)
            assigned: list[tuple[str, int]] = []
            made.subscribe(["in"], assigned.extend, lambda _: None, lambda _: None)
            made.init_transactions()
            while not assigned:
                made.poll(100, 0.2)
            return made

        clients = new_clients()
        streak = AbortStreak(NEW_CLIENTS_AFTER_S)
        offset = 0

        def transaction(label: str) -> None:
            """As the engine does: an aborted transaction is aborted and made again."""
            nonlocal offset, clients, streak
            offset += 1
            began = time.monotonic()
            renewed = False
            while True:
                try:
                    clients.produce("out", b"key", b"value")
                    clients.commit({("in", 0): offset})  # 1 s calls, retried for up to 30 s
                    break
                except TransactionAborted as exc:
                    print(f"{label}: aborted ({exc}), made again", flush=True)
                    clients.abort()
                    if streak.aborted(time.monotonic()):
                        if renewed:
                            raise
                        renewed = True
                        print(f"{label}: aborted for {NEW_CLIENTS_AFTER_S:g} s: new clients",
                              flush=True)  # fmt: skip
                        clients.close()
                        clients = new_clients()  # as a renewal in the engine: a streak of its own
                        streak = AbortStreak(NEW_CLIENTS_AFTER_S)
                    else:
                        clients.poll(100, 1.0)  # a rejoin of the group is served here
            streak.committed()
            clients.poll(100, 0)
            print(f"{label}: committed in {time.monotonic() - began:.1f} s", flush=True)

        for i in range(TRANSACTIONS_PER_ROUND):
            transaction(f"before any restart, transaction {i}")
        for r in range(args.restarts):
            broker.stop()
            time.sleep(3)  # long enough for every client to see every broker down
            broker.start()
            for i in range(TRANSACTIONS_PER_ROUND):
                transaction(f"after restart {r + 1}, transaction {i}")
        clients.close()
        print("all committed")
        return 0
    except TidemarkError as exc:
        print(f"failed: {exc}")
        return 1
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
