"""How the transactional clients translate librdkafka's errors, with a stand-in for the call
(no broker): what is retried, for how long, and what ends the process."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException

from streams.kafka import transactions
from streams.kafka.settings import KafkaSettings
from streams.kafka.transactions import (
    TransactionAborted,
    TransactionalClients,
    TransactionFatal,
    _retrying,
)


class _Clock:
    """time.monotonic and time.sleep of the module under test, moved by hand."""

    def __init__(self) -> None:
        self.now_s = 1000.0

    def monotonic(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.now_s += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(transactions.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(transactions.time, "sleep", fake.sleep)
    return fake


def _failing(clock: _Clock, errors: list[KafkaError]) -> Callable[[float], str]:
    """A call that fails with each of `errors` in turn, each after its timeout, then succeeds."""
    left = list(errors)

    def call(timeout_s: float) -> str:
        if left:
            clock.now_s += timeout_s
            raise KafkaException(left.pop(0))
        return "done"

    return call


def _timed_out() -> KafkaError:
    return KafkaError(KafkaError._TIMED_OUT, "Timed out waiting for operation to finish",
                      retriable=True)  # fmt: skip


def test_an_abort_is_retried_while_the_broker_is_gone_up_to_its_bound(
    clock: _Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """Four minutes of timeouts, then an answer: no error, and a line every 30 s meanwhile; past
    WAIT_FOR_BROKER_S the wait is fatal (new clients: librdkafka can stay stuck)."""
    slices = int(240 / transactions.CALL_SLICE_S)
    caplog.set_level(logging.WARNING, "streams.kafka")
    began = clock.now_s
    deadline = began + transactions.WAIT_FOR_BROKER_S
    call = _failing(clock, [_timed_out()] * slices)
    assert _retrying(call, "abort_transaction", deadline) == "done"
    assert clock.now_s - began == pytest.approx(240)
    waiting = [r for r in caplog.records if "waiting for the broker" in r.getMessage()]
    assert len(waiting) == pytest.approx(240 / transactions.WAITING_LOG_EVERY_S, abs=1)
    assert "abort_transaction: no success for 30 s" in waiting[0].getMessage()
    began = clock.now_s
    with pytest.raises(TransactionFatal, match="still failing after 300 s"):
        _retrying(_failing(clock, [_timed_out()] * 1000), "abort_transaction",
                  began + transactions.WAIT_FOR_BROKER_S)  # fmt: skip


def test_with_a_deadline_a_call_that_keeps_timing_out_ends_at_it(clock: _Clock) -> None:
    call = _failing(clock, [_timed_out()] * 100)
    began = clock.now_s
    with pytest.raises(TransactionFatal):
        _retrying(call, "committed", began + 5)  # a timeout flagged neither way is fatal
    assert clock.now_s - began == pytest.approx(5, abs=transactions.CALL_SLICE_S)


def test_an_error_that_retrying_cannot_mend_ends_the_wait_at_once(clock: _Clock) -> None:
    fenced = KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True)
    call = _failing(clock, [_timed_out(), _timed_out(), fenced])
    with pytest.raises(TransactionFatal, match="fenced"):
        _retrying(call, "abort_transaction", clock.now_s + 300)
    abortable = KafkaError(KafkaError._MSG_TIMED_OUT, "timed out", txn_requires_abort=True)
    with pytest.raises(TransactionAborted):
        _retrying(_failing(clock, [abortable]), "send_offsets_to_transaction", clock.now_s + 30)


def test_offsets_not_sent_by_their_deadline_abort_the_transaction(clock: _Clock) -> None:
    """send_offsets_to_transaction comes before EndTxn: a transaction whose offsets could not be
    sent cannot have committed, so it is aborted (and the abort waits for the broker)."""
    began = clock.now_s
    with pytest.raises(TransactionAborted, match="still failing after 30 s"):
        _retrying(_failing(clock, [_timed_out()] * 100), "send_offsets_to_transaction",
                  began + 30, late=TransactionAborted)  # fmt: skip
    assert clock.now_s - began == pytest.approx(30, abs=transactions.CALL_SLICE_S)
    fatal = KafkaError(KafkaError._FATAL, "fatal", fatal=True)
    with pytest.raises(TransactionFatal):
        _retrying(_failing(clock, [fatal]), "send_offsets_to_transaction", clock.now_s + 30,
                  late=TransactionAborted)  # fmt: skip


class _Producer:
    def __init__(self, call: Callable[[float], str]) -> None:
        self.abort_transaction = call
        self.commit_transaction = call
        self.begun = 0

    def begin_transaction(self) -> None:
        self.begun += 1


def test_an_abort_waits_for_the_broker_and_a_fatal_one_ends_the_process(clock: _Clock) -> None:
    clients = TransactionalClients(
        KafkaSettings("127.0.0.1:1"), group_id="g", transactional_id="t", session_timeout_ms=6000
    )
    try:
        real = clients._producer
        clients._producer = _Producer(_failing(clock, [_timed_out()] * 120))  # type: ignore[assignment]
        clients._in_transaction = True
        clients.abort()  # two minutes without the broker: no exit
        assert not clients.in_transaction
        failing = KafkaError(KafkaError._INVALID_ARG, "cannot abort", txn_requires_abort=True)
        clients._producer = _Producer(_failing(clock, [failing]))  # type: ignore[assignment]
        clients._in_transaction = True
        with pytest.raises(TransactionFatal, match="cannot abort"):
            clients.abort()
    finally:
        clients._producer = real
        clients.close()


def test_a_commit_that_times_out_is_resumed_until_the_broker_answers(clock: _Clock) -> None:
    """Once EndTxn may have gone out, only the broker knows the outcome: no abort, no exit."""
    clients = TransactionalClients(
        KafkaSettings("127.0.0.1:1"), group_id="g", transactional_id="t", session_timeout_ms=6000
    )
    real = clients._producer
    try:
        clients._producer = _Producer(_failing(clock, [_timed_out()] * 180))  # type: ignore[assignment]
        began = clock.now_s
        clients.commit({})  # three minutes of timeouts, then committed
        assert clock.now_s - began == pytest.approx(180)
        assert not clients.in_transaction
    finally:
        clients._producer = real
        clients.close()
