"""An in-process fake of the confluent engine's Kafka clients (its TransactionClients port).

`FakeBroker` holds what the clients share: each topic-partition's records and the group's
committed offsets, both written only by a committed transaction. `FakeClients` plays one
process's consumer and transactional producer over it, and can fail at a chosen step of a
commit (`fail_at`), so that the commit path, an abort, a rewind and a revocation are tested
without a broker (tests/coordinator/test_confluent_commit.py, test_eos_renewal.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from streams.coordinator.processor import partition_of
from streams.kafka.transactions import Input, TransactionAborted

Partitions = Callable[[list[tuple[str, int]]], None]

# The steps a fake can fail at: producing to a topic (any, or `produce:<topic>`), sending the
# offsets, the delivery of what the transaction produced (its commit then aborts), the commit.
STEPS = ("produce", "send_offsets", "deliver", "commit_transaction")


class FakeBroker:
    """What the fake clients share; `faults[i]` are the keyword arguments of the i-th clients
    made (what they fail at)."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.log: dict[tuple[str, int], list[tuple[bytes | None, bytes | None]]] = {}
        self.offsets: dict[tuple[str, int], int] = {}
        self.reachable = True
        self.made: list[FakeClients] = []
        self.faults: list[dict[str, Any]] = []

    def append(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        self.log.setdefault((topic, partition), []).append((key, value))

    def records(self, topic: str) -> list[Any]:
        """The JSON values visible on a topic (committed), tombstones left out."""
        return [json.loads(v) for (t, _), rs in sorted(self.log.items()) if t == topic
                for _, v in rs if v is not None]  # fmt: skip

    def watermark(self, topic: str, partition: int) -> int:
        """The end of a partition: the offset its next record gets."""
        return len(self.log.get((topic, partition), []))

    def count(self, topic: str) -> int:
        """Every record visible on a topic, tombstones included."""
        return sum(len(rs) for (t, _), rs in self.log.items() if t == topic)

    def make(self, *args: Any, **kwargs: Any) -> FakeClients:
        faults = self.faults[len(self.made)] if len(self.made) < len(self.faults) else {}
        made = FakeClients(self, **faults)
        self.made.append(made)
        return made


class FakeClients:
    """One process's clients over a FakeBroker.

    `fail_at`: a step of STEPS (or `produce:<topic>`) that raises `error` (an abortable
    TransactionAborted by default) the next time it is reached; `commit_error`, `abort_error`,
    `poll_error` and `init_error` fail those calls every time.
    """

    def __init__(
        self,
        broker: FakeBroker,
        commit_error: Exception | None = None,
        abort_error: Exception | None = None,
        poll_error: Exception | None = None,
        init_error: Exception | None = None,
        fail_at: str | None = None,
        error: Exception | None = None,
    ) -> None:
        self.broker = broker
        self.init_error = init_error
        self.commit_error, self.abort_error = commit_error, abort_error
        self.poll_error = poll_error
        self.fail_at = fail_at
        self.error = error
        self.calls: list[str] = []
        self.positions: dict[tuple[str, int], int] = {}
        self.seeks: list[dict[tuple[str, int], int]] = []
        self.pending: list[tuple[str, int, bytes | None, bytes | None]] = []
        self.pending_offsets: dict[tuple[str, int], int] = {}
        self._reports: list[tuple[Any, int, int]] = []  # (on_delivery, partition, offset)
        self.committed_txns = 0
        self.aborted_txns = 0
        self._callbacks: tuple[Partitions, Partitions, Partitions] | None = None
        self._topics: list[str] = []
        self._assigned = False
        self._in_transaction = False
        self.detached = self.closed = False

    def _reached(self, step: str) -> None:
        if self.fail_at is not None and step.startswith(self.fail_at):
            self.fail_at = None
            raise self.error or TransactionAborted(f"{step}: injected by the test")

    # -- the group ------------------------------------------------------------------------

    def init_transactions(self) -> None:
        self.calls.append("init_transactions")
        if self.init_error is not None:
            raise self.init_error

    def subscribe(self, topics: Any, assigned: Partitions, revoked: Partitions,
                  lost: Partitions) -> None:  # fmt: skip
        self.calls.append("subscribe")
        self._topics, self._callbacks = list(topics), (assigned, revoked, lost)

    def poll(self, max_messages: int, timeout_s: float) -> list[Input]:
        time.sleep(min(timeout_s, 0.005))
        if self._callbacks is not None and not self._assigned and not self.detached:
            self._assigned = True
            partitions = range(self.broker.partitions)
            self._callbacks[0]([(t, p) for t in self._topics for p in partitions])
        elif self._assigned and self.poll_error is not None:
            raise self.poll_error
        out = []
        for (topic, p), at in self.positions.items():
            for offset, (key, value) in enumerate(self.broker.log.get((topic, p), [])):
                if offset >= at and len(out) < max_messages:
                    out.append(Input(topic, p, offset, key, value))
                    self.positions[(topic, p)] = offset + 1
        return out

    def revoke(self, partitions: list[int]) -> None:
        """The group takes these partitions away (the revocation callback runs)."""
        assert self._callbacks is not None
        tps = [(t, p) for t in self._topics for p in partitions]
        self._callbacks[1](tps)
        for tp in tps:
            self.positions.pop(tp, None)

    def lose(self, partitions: list[int]) -> None:
        """The assignment is lost (the session timed out): the lost callback runs."""
        assert self._callbacks is not None
        tps = [(t, p) for t in self._topics for p in partitions]
        self._callbacks[2](tps)
        for tp in tps:
            self.positions.pop(tp, None)

    def committed(self, tps: Any) -> dict[tuple[str, int], int]:
        return {tp: self.broker.offsets.get(tp, 0) for tp in tps}

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        return 0, len(self.broker.log.get((topic, partition), []))

    def assign(self, offsets: dict[tuple[str, int], int]) -> None:
        self.positions.update(offsets)

    def seek(self, offsets: dict[tuple[str, int], int]) -> None:
        self.seeks.append(dict(offsets))
        self.positions.update(offsets)

    # -- the transaction ------------------------------------------------------------------

    def produce(self, topic: str, key: bytes, value: bytes | None, partition: int | None = None,
                on_delivery: Any = None) -> None:  # fmt: skip
        self._in_transaction = True  # the first produce begins the transaction
        self._reached(f"produce:{topic}")
        p = partition if partition is not None else partition_of(key, self.broker.partitions)
        self.pending.append((topic, p, key, value))
        if on_delivery is not None:  # the offset it will have once committed
            before = sum(1 for t, q, _, _ in self.pending[:-1] if (t, q) == (topic, p))
            offset = len(self.broker.log.get((topic, p), [])) + before
            self._reports.append((on_delivery, p, offset))

    @property
    def in_transaction(self) -> bool:
        return self._in_transaction

    def send_offsets(self, offsets: dict[tuple[str, int], int]) -> None:
        self.calls.append("send_offsets")
        self._in_transaction = True
        self._reached("send_offsets")
        self.pending_offsets.update(offsets)

    def commit_transaction(self) -> None:
        self.calls.append("commit")
        self._in_transaction = True
        if self.commit_error is not None:
            raise self.commit_error
        reports, self._reports = self._reports, []
        try:  # the flush: every delivery report is served, then the commit is decided
            self._reached("deliver")
        except Exception:
            for on_delivery, p, _ in reports:
                on_delivery("undelivered", _Delivered(p, -1))
            raise
        for on_delivery, p, offset in reports:
            on_delivery(None, _Delivered(p, offset))
        self._reached("commit_transaction")
        for topic, p, key, value in self.pending:
            self.broker.append(topic, p, key, value)
        self.broker.offsets.update(self.pending_offsets)
        self.pending, self.pending_offsets, self._in_transaction = [], {}, False
        self.committed_txns += 1

    def commit(self, offsets: dict[tuple[str, int], int]) -> None:
        self.send_offsets(offsets)
        self.commit_transaction()

    def abort(self) -> None:
        self.calls.append("abort")
        if self._in_transaction:
            self.aborted_txns += 1
        self.pending, self.pending_offsets, self._in_transaction = [], {}, False
        self._reports = []
        if self.abort_error is not None:
            raise self.abort_error

    def detach(self) -> None:
        self.detached, self._in_transaction = True, False

    def close(self) -> None:
        self.closed = True


class _Delivered:
    def __init__(self, partition: int, offset: int) -> None:
        self._p, self._o = partition, offset

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o


class FakeChangelog:
    """The changelog as a restore reads it (rocks.Changelog), over a FakeBroker's topic."""

    history = "fake-changelog"
    tombstones_kept_ms = 86_400_000

    def __init__(self, broker: FakeBroker, topic: str) -> None:
        self.broker, self.topic = broker, topic

    def resume_at(self, partition: int, stored_offset: int) -> int | None:
        start = stored_offset + 1
        return None if start > len(self.broker.log.get((self.topic, partition), [])) else start

    def read(
        self, starts: dict[int, int]
    ) -> Iterator[tuple[int, list[tuple[int, bytes, bytes | None]]]]:
        for partition, start in starts.items():
            records = self.broker.log.get((self.topic, partition), [])
            entries = [(o, k, v) for o, (k, v) in enumerate(records) if o >= start and k]
            if entries:
                yield partition, entries
