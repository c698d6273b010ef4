"""How the transactional clients call librdkafka: in slices up to a deadline, retrying what it
flags retriable, and translating its errors into the engine's three outcomes (retry, abort,
renew the clients: streams.kafka.txn_errors)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from streams.errors import TidemarkError
from streams.kafka.caller import STUCK_GRACE_S, Caller
from streams.kafka.txn_errors import ProducerFenced, TransactionAborted, TransactionFatal

log = logging.getLogger("streams.kafka")

# How long one client call may block before the engine treats the broker as gone.
CALL_TIMEOUT_S = 30.0
# A blocking transactional call is made in slices of at most this long (a timed-out call is
# retriable, and librdkafka resumes it): Python runs signal handlers only between calls, so a
# SIGTERM during a 30 s commit with the broker gone would otherwise wait for the whole call
# before the stop deadline even started.
CALL_SLICE_S = 1.0

_FENCED_CODES = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


_SLICE_TIMEOUTS = frozenset({KafkaError._TIMED_OUT, KafkaError._TIMED_OUT_QUEUE})


def classify(exc: KafkaException, what: str) -> TidemarkError:
    err: KafkaError = exc.args[0]
    if err.code() in _FENCED_CODES:
        return ProducerFenced(f"{what}: {err.str()} (fenced)")
    if err.fatal():
        return TransactionFatal(f"{what}: {err.str()} (fatal: new clients are needed)")
    if err.txn_requires_abort():
        return TransactionAborted(f"{what}: {err.str()}")
    # librdkafka flags what it can retry; anything unflagged is treated as fatal.
    return TransactionFatal(f"{what}: {err.str()}")


def retrying(
    call: Callable[[float], Any], what: str, deadline_s: float, caller: Caller | None = None
) -> Any:
    """Call with a timeout of at most CALL_SLICE_S until it succeeds, retrying what librdkafka
    marks retriable (a slice that timed out among them), up to the deadline; through `caller`
    if given (a call that never returns then raises CallStuck)."""
    while True:
        timeout_s = max(0.01, min(CALL_SLICE_S, deadline_s - time.monotonic()))
        try:
            if caller is None:
                return call(timeout_s)
            wait_s = max(timeout_s, deadline_s - time.monotonic()) + STUCK_GRACE_S
            return caller.call(partial(call, timeout_s), wait_s, what)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            # A slice that timed out is retried whatever its flags say (the transactional calls
            # flag it retriable; a consumer's committed() does not, and is safe to ask again).
            # "Timed out in queue" is the same slice ending while its request still waited behind
            # another to the group coordinator (seen under KIP-848 while a member joins).
            timed_out = err.code() in _SLICE_TIMEOUTS
            if (err.retriable() or timed_out) and time.monotonic() < deadline_s:
                if not timed_out:
                    log.warning("%s: %s; retrying", what, err.str())
                    time.sleep(0.05)
                continue
            raise classify(exc, what) from exc
