"""Blocking librdkafka calls on a thread of their own (streams.kafka.caller): a call that never
returns (its timeout ignored inside librdkafka, as a broker outage showed) is given up on."""

from __future__ import annotations

import threading
import time

import pytest

from streams.kafka.caller import Caller
from streams.kafka.txn_errors import CallStuck


def test_a_call_returns_its_result_or_raises_its_error() -> None:
    caller = Caller()
    assert caller.call(lambda: 42, 5.0, "answer") == 42
    with pytest.raises(ValueError, match="bad"):
        caller.call(lambda: (_ for _ in ()).throw(ValueError("bad")), 5.0, "raise")


def test_a_call_that_never_returns_is_given_up_on_and_so_is_every_later_one() -> None:
    caller = Caller()
    release = threading.Event()
    began = time.monotonic()
    with pytest.raises(CallStuck, match="send_offsets_to_transaction: no return within"):
        caller.call(lambda: release.wait(30), 0.3, "send_offsets_to_transaction")
    assert time.monotonic() - began < 2
    with pytest.raises(CallStuck, match="an earlier call is stuck"):
        caller.call(lambda: 1, 5.0, "abort_transaction")
    release.set()  # the stuck call's thread ends (the no_leftovers fixture checks)


def test_the_thread_ends_when_idle_and_a_new_one_serves_the_next_call() -> None:
    caller = Caller()
    assert caller.call(threading.current_thread, 5.0, "which").name == "txn-calls"
    deadline = time.monotonic() + 5
    while any(t.name == "txn-calls" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the idle thread did not end"
        time.sleep(0.05)
    assert caller.call(lambda: "again", 5.0, "again") == "again"
