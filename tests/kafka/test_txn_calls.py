"""How a sliced client call retries: a slice that timed out (in flight or still in the queue) is
asked again up to the deadline; anything librdkafka does not flag retriable ends the call."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException

from streams.kafka.txn_calls import retrying
from streams.kafka.txn_errors import TransactionAborted, TransactionFatal

Call = Callable[[float], str]


def failing(errors: list[KafkaError], then: str = "ok") -> tuple[Call, list[float]]:
    slices: list[float] = []

    def call(timeout_s: float) -> str:
        slices.append(timeout_s)
        if errors:
            raise KafkaException(errors.pop(0))
        return then

    return call, slices


@pytest.mark.parametrize("code", [KafkaError._TIMED_OUT, KafkaError._TIMED_OUT_QUEUE])
def test_a_slice_that_timed_out_is_asked_again(code: int) -> None:
    # Neither is flagged retriable by a consumer's committed(): the code alone decides.
    call, slices = failing([KafkaError(code), KafkaError(code)])
    assert retrying(call, "fetching committed offsets", time.monotonic() + 30) == "ok"
    assert len(slices) == 3
    assert all(0 < s <= 1.0 for s in slices)


def test_a_retriable_error_is_asked_again() -> None:
    call, slices = failing([KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, retriable=True)])
    assert retrying(call, "committing", time.monotonic() + 30) == "ok"
    assert len(slices) == 2


def test_timeouts_past_the_deadline_end_the_call() -> None:
    call, slices = failing([KafkaError(KafkaError._TIMED_OUT_QUEUE)] * 1000)
    with pytest.raises(TransactionFatal, match=r"^fetching committed offsets: "):
        retrying(call, "fetching committed offsets", time.monotonic() - 1)
    assert len(slices) == 1


def test_an_unflagged_error_ends_the_call_at_once() -> None:
    call, slices = failing([KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)])
    with pytest.raises(TransactionFatal):
        retrying(call, "fetching committed offsets", time.monotonic() + 30)
    assert len(slices) == 1


def test_an_error_that_needs_an_abort_is_not_retried() -> None:
    call, _ = failing([KafkaError(KafkaError._STATE, txn_requires_abort=True)])
    with pytest.raises(TransactionAborted):
        retrying(call, "committing", time.monotonic() + 30)
