"""The confluent coordinator rides out a full broker outage (issue 26, item 2): its one broker
stopped for longer than the transaction timeout and the old commit and abort deadlines (30 s
each: the process used to exit 60 s into an outage), then started again on the same port and
data. The process never exits, its /health says it waits for the brokers meanwhile, and once
they are back every stream's `commits` chain is exactly once and progress resumes.

The test starts a broker of its own: stopping the session's would stop every other test's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from streams.dev.broker import ephemeral_broker
from tests.coordinator.test_eos import BACKLOG, WINDOW, Run
from tests.support.coordinator import CoordinatorProcess

pytestmark = pytest.mark.broker

OUTAGE_S = 90.0  # past 10 s (transaction timeout) + 30 s (commit) + 30 s (abort)


def test_a_full_broker_outage_is_waited_out_without_exit_and_exactly_once(
    unique: str, tmp_path: Path
) -> None:
    broker = ephemeral_broker(tmp_path / "kafka")
    broker.start()
    kafka = broker.settings
    prefix = f"brokerout-{unique}"
    proc = CoordinatorProcess(
        kafka, prefix, tmp_path / "data", tmp_path / "c.log", partitions=4, engine="confluent"
    )
    run: Run | None = None
    try:
        proc.start().wait_ready(partitions=4)
        run = Run(kafka, prefix, 4, unique)
        with run.responder:
            run.create()
            run.wait_caught_up()
            broker.stop()
            began = time.monotonic()
            seen: list[tuple[float, dict[str, Any]]] = []
            while time.monotonic() - began < OUTAGE_S:
                assert proc.exited() is None, f"exited during the outage:\n{proc.tail(8000)}"
                doc = proc.health()
                if doc is not None:
                    seen.append((time.monotonic() - began, doc))
                time.sleep(1.0)
            waiting = [(at_s, d) for at_s, d in seen if d["status"] == "waiting_for_brokers"]
            assert waiting, f"/health never said it waits: {[d['status'] for _, d in seen]}"
            assert waiting[-1][1]["waiting"]["since_ms"] > 0 and waiting[-1][1]["waiting"]["error"]
            broker.start()
            back = time.monotonic()
            at_return = run.marks()
            run.tail.wait_for(
                "progress on every stream after the outage",
                lambda: all(m > at_return[s] + 5 * WINDOW for s, m in run.marks().items()),
                timeout_s=90,
            )
            print(f"\nwaiting for the brokers from {waiting[0][0]:.0f} s into the outage; "
                  f"progress on every stream {time.monotonic() - back:.1f} s after the broker "
                  "was back")  # fmt: skip
            assert proc.exited() is None, proc.tail(8000)
        run.tail.drain()
        marks = run.check()
        assert all(m >= run.start + BACKLOG * WINDOW for m in marks.values()), marks
        doc = proc.health()
        assert doc is not None and doc["status"] == "ok", doc
        assert doc["stats"]["renewals"] >= 1, doc
    finally:
        if run is not None:
            run.close()
        proc.kill()
        broker.stop()
