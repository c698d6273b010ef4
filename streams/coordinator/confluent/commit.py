"""The commit of one Kafka transaction, in numbered steps (the order Quix Streams'
`Checkpoint.commit` follows, and KIP-892/KIP-1035 move Kafka Streams to).

Words: to *commit* is the Kafka transaction's commit only; to *announce* is to send a stream's
finished windows on `commits`; to *persist* is to write the local RocksDB; to *flush* is to wait
for the producer's deliveries.

Any step up to 4 may raise `TransactionAborted` (the engine then aborts, drops the open
transaction's state and rewinds the inputs) or a `TransactionFatal` (new clients). Step 5 runs
only after the commit: the local store never holds what Kafka did not commit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, Protocol

from streams.coordinator.confluent.clients import TransactionClients

log = logging.getLogger("streams.coordinator")

# A commit this long (offsets, flush, EndTxn) is logged: it delays every output it holds.
SLOW_COMMIT_S = 0.1


class UnitOfWork(Protocol):
    """The open transaction's content as the commit needs it (the Processor and the state)."""

    def checkpoint(self, now_ms: int) -> None:
        """Close the unit of work: announce the windows that wait, the views owed, and put
        every changed record into the write-back buffer."""
        ...


class WriteBack(Protocol):
    """The transaction's write-back buffer over the committed stores (TransactionalState)."""

    def pending_by_partition(self) -> Iterable[tuple[int, list[tuple[bytes, bytes | None]]]]: ...

    def persist(self, changelog_offsets: dict[int, int]) -> None: ...


class Committed(NamedTuple):
    changelog_records: int
    took_s: float


def commit(
    clients: TransactionClients,
    work: UnitOfWork,
    state: WriteBack,
    positions: dict[tuple[str, int], int],
    changelog_topic: str,
    now_ms: int,
    reached: Callable[[str], None] = lambda point: None,
) -> Committed:
    """Commit everything since the last commit at once: outputs, state, input positions.

    `reached(point)` is the crash-point hook (crash_points.py, beside this module) between
    steps.
    """
    # 1. Close the unit of work: the Processor's last outputs and state changes join it.
    work.checkpoint(now_ms)

    # 2. Produce the changelog record of every key in the write-back buffer. Only the last
    #    record of a partition reports its delivery: its offset is the partition's highest (an
    #    idempotent producer keeps their order), and a failed delivery of any of them fails the
    #    commit (abortable) anyway.
    changelog_offsets: dict[int, int] = {}

    def delivered(err: Any, msg: Any) -> None:
        if err is None:  # else the transaction cannot commit: commit_transaction says so
            partition, offset = msg.partition(), msg.offset()
            if offset > changelog_offsets.get(partition, -1):
                changelog_offsets[partition] = offset

    produce = clients.produce
    writes = 0
    for partition, changes in state.pending_by_partition():
        *before, (last_key, last_value) = changes
        for key, value in before:
            produce(changelog_topic, key, value, partition)
        produce(changelog_topic, last_key, last_value, partition, delivered)
        writes += len(changes)
    reached("after_produce")

    # 3. Send the input positions with the group metadata (in every transaction: a zombie's
    #    time-driven writes then never commit). They go before the outputs are flushed, so that
    #    their round trips overlap the deliveries (ack-to-commit p50 75 -> 70 ms in one traced
    #    run; docs/benchmarks.md, seventh pass).
    began = time.monotonic()
    clients.send_offsets(dict(positions))
    reached("after_send_offsets")

    # 4. Commit the transaction: it flushes every output and changelog record first (their
    #    delivery reports fill `changelog_offsets`) and aborts if any was not delivered.
    clients.commit_transaction()
    took_s = time.monotonic() - began
    reached("after_commit")
    if took_s >= SLOW_COMMIT_S:
        log.info("a transaction took %.0f ms to commit (its outputs and %d changelog records "
                 "flushed, the offsets sent, EndTxn)", took_s * 1000, writes)  # fmt: skip

    # 5. Persist: write each partition's RocksDB from the buffer, with the changelog offset it
    #    now reflects, in one batch. The next transaction begins at its first produce.
    state.persist(changelog_offsets)
    reached("after_rocksdb_write")
    return Committed(writes, took_s)
