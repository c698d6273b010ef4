"""The confluent engine renews its clients in process (issue 26, item 2), driven in-process:
the real `ConfluentEngine` loop over fake transactional clients that share a tiny in-memory
"broker" (its topics' records and the group's committed offsets, both written only by a
committed transaction).

- An abort that fails with INVALID_TXN_STATE (what a 3-broker cluster with one broker killed
  gave) used to end the process with status 1: now the clients are abandoned, new ones are
  made (init_transactions before they join the group), and the input of the void transaction
  is processed again on them, its outputs committed once.
- A commit that gives up while no broker answers: /health says the engine waits for the
  brokers, and it renews once the probe answers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from streams.coordinator.confluent import engine as engine_module
from streams.coordinator.confluent.engine import ConfluentEngine
from streams.coordinator.confluent.watchdog import LoopWatchdog
from streams.coordinator.processor import partition_of
from streams.coordinator.settings import CoordinatorSettings
from streams.kafka import transactions
from streams.kafka.transactions import TransactionAborted, TransactionFatal
from streams.topics import Topics

from .fake_clients import FakeBroker

PARTITIONS = 2


class _NoTable:
    def start(self) -> None: ...

    def stop(self) -> None: ...


def _abort_failed(message: str) -> Exception:
    """What TransactionalClients.abort raises when the abort fails (a TransactionFatal)."""
    return getattr(transactions, "AbortFailed", TransactionFatal)(message)


class Running:
    """The engine's loop on a thread of its own; what ended it, if anything did."""

    def __init__(self, engine: ConfluentEngine) -> None:
        self.engine = engine
        self.ended: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="engine-under-test")

    def _run(self) -> None:
        try:
            self.engine.run()
        except BaseException as exc:  # SystemExit included: that is the defect
            self.ended = exc

    def __enter__(self) -> Running:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.engine._stopping.set()
        self.thread.join(20)

    def wait_for(self, what: str, check: Callable[[], bool], timeout_s: float = 15) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.ended is None, f"the engine ended: {self.ended!r}"
            if check():
                return
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}")


def _engine(tmp_path: Path, broker: FakeBroker, monkeypatch: pytest.MonkeyPatch,
            prefix: str) -> ConfluentEngine:  # fmt: skip
    monkeypatch.setattr(engine_module, "TransactionalClients", broker.make)
    monkeypatch.setattr(
        engine_module, "cluster_answers", lambda *a, **k: broker.reachable, raising=False
    )
    settings = CoordinatorSettings(
        topics=Topics(prefix), data_dir=tmp_path, partitions=PARTITIONS, view_interval_ms=0
    )
    engine = ConfluentEngine(settings)
    engine._health_table = _NoTable()  # type: ignore[assignment]
    engine.watchdog = LoopWatchdog(stall_s=2.0)

    def restore(partitions: list[int]) -> int:  # the committed stores are the local ones
        for p in partitions:
            engine.state.open(p)
        return 0

    engine._restore = restore  # type: ignore[method-assign]
    return engine


def _upsert(broker: FakeBroker, topics: Topics, stream_id: str) -> None:
    start = time.time_ns() // 1_000_000 - 5_000
    value = {"type": "upsert", "stream_id": stream_id, "start_ms": start - start % 1000,
             "window_ms": 1000, "step_ms": 1000}  # fmt: skip
    key = stream_id.encode()
    broker.append(topics.control, partition_of(key, PARTITIONS), key, json.dumps(value).encode())


def test_an_abort_that_fails_renews_the_clients_and_redoes_the_void_transaction_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = FakeBroker(PARTITIONS)
    timed_out = TransactionAborted("commit_transaction: 1 message timed out")
    invalid = _abort_failed("abort_transaction: Broker: Producer attempted a transactional "
                            "operation in an invalid state")  # fmt: skip
    broker.faults = [{"commit_error": timed_out, "abort_error": invalid}]
    engine = _engine(tmp_path, broker, monkeypatch, "renew-abort")
    _upsert(broker, engine.topics, "s1")
    with Running(engine) as running:
        running.wait_for("a transaction committed on new clients", lambda: len(
            broker.made) >= 2 and broker.made[1].committed_txns >= 1)  # fmt: skip
        doc = engine.health()
    old, new = broker.made[0], broker.made[1]
    assert running.ended is None, running.ended
    assert old.committed_txns == 0 and old.calls.count("abort") == 1, old.calls
    assert old.detached and old.closed, "the old clients are abandoned and closed"
    assert new.calls[:2] == ["init_transactions", "subscribe"], new.calls
    assert len(broker.made) == 2, "one renewal"
    assert doc["stats"]["renewals"] == 1, doc
    assert doc["status"] == "ok", doc
    # The upsert of the void transaction was read again on the new clients and committed once:
    # its offset is committed, and each of its tasks is visible once.
    control_p = partition_of(b"s1", PARTITIONS)
    assert broker.offsets[(engine.topics.control, control_p)] == 1
    tasks = [t["task_id"] for t in broker.records(engine.topics.tasks)]
    assert tasks and len(tasks) == len(set(tasks)), tasks


def test_a_gone_cluster_is_waited_for_then_the_clients_are_renewed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = FakeBroker(PARTITIONS)
    gave_up = TransactionFatal("commit_transaction: Local: Timed out")
    broker.faults = [{"commit_error": gave_up}]
    broker.reachable = False
    engine = _engine(tmp_path, broker, monkeypatch, "renew-wait")
    _upsert(broker, engine.topics, "s1")
    with Running(engine) as running:
        running.wait_for("/health to say it waits for the brokers",
                         lambda: engine.health()["status"] == "waiting_for_brokers")  # fmt: skip
        doc = engine.health()
        assert doc["waiting"]["since_ms"] > 0 and "Timed out" in doc["waiting"]["error"], doc
        assert doc["partitions"] == [], "every partition is released while it waits"
        time.sleep(1.5)
        assert len(broker.made) == 1, "no new clients while no broker answers"
        broker.reachable = True
        running.wait_for("a transaction committed on new clients", lambda: len(
            broker.made) >= 2 and broker.made[1].committed_txns >= 1, timeout_s=20)  # fmt: skip
        doc = engine.health()
    assert running.ended is None, running.ended
    assert doc["status"] == "ok" and "waiting" not in doc, doc
    assert doc["partitions"] == [0, 1], doc
    tasks = [t["task_id"] for t in broker.records(engine.topics.tasks)]
    assert tasks and len(tasks) == len(set(tasks)), tasks


def test_a_start_whose_init_transactions_times_out_waits_and_renews_instead_of_exiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A coordinator restarted while its transaction coordinator moves (the cluster chaos run:
    `init_transactions: Timed out`, status 1 at start) goes through the same renewal."""
    broker = FakeBroker(PARTITIONS)
    broker.faults = [{"init_error": TransactionFatal("init_transactions: Local: Timed out")}]
    broker.reachable = False
    engine = _engine(tmp_path, broker, monkeypatch, "renew-start")
    _upsert(broker, engine.topics, "s1")
    with Running(engine) as running:
        running.wait_for("/health to say it waits for the brokers",
                         lambda: engine.health()["status"] == "waiting_for_brokers")  # fmt: skip
        broker.reachable = True
        running.wait_for("a transaction committed on new clients", lambda: len(
            broker.made) >= 2 and broker.made[1].committed_txns >= 1, timeout_s=20)  # fmt: skip
    assert running.ended is None, running.ended
    assert broker.made[0].calls == ["init_transactions"], broker.made[0].calls
    tasks = [t["task_id"] for t in broker.records(engine.topics.tasks)]
    assert tasks and len(tasks) == len(set(tasks)), tasks


def test_a_stalled_consumer_gets_new_clients(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What TransactionalClients.poll raises when its consumer sits behind readable records
    for 30 s (streams.kafka.progress)."""
    broker = FakeBroker(PARTITIONS)
    stalled = getattr(transactions, "ConsumerStalled", TransactionFatal)
    broker.faults = [{"poll_error": stalled("consumer: behind on control[0] at 0 of 1")}]
    engine = _engine(tmp_path, broker, monkeypatch, "renew-stall")
    _upsert(broker, engine.topics, "s1")
    with Running(engine) as running:
        running.wait_for("a transaction committed on new clients", lambda: len(
            broker.made) >= 2 and broker.made[1].committed_txns >= 1)  # fmt: skip
        doc = engine.health()
    assert running.ended is None, running.ended
    assert broker.made[0].detached and broker.made[0].closed
    assert doc["stats"]["renewals"] == 1 and doc["status"] == "ok", doc
    assert dict(engine.renewal.renewals) == {"stalled_consumer": 1}
