"""The coordinator's transactional clients go on across broker restarts.

With librdkafka's default `metadata.recovery.strategy=rebootstrap`, the first
send_offsets_to_transaction after a one-broker restart hangs inside librdkafka, past its
timeout (librdkafka issues 5511 and 5456): `--strategy rebootstrap` shows it (2 runs in 2 on
this machine). The hang is bounded from outside: the clients run in a process of their own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streams.dev.broker import LocalBroker

# `make test-long`: `make test` restarts brokers in the three-node test's rolling restart.
pytestmark = [pytest.mark.broker, pytest.mark.long]

ROOT = Path(__file__).resolve().parents[2]
# A broker start and two restarts take about 25 s; a transaction stuck after a restart takes up
# to two rounds of 30 s offsets and 15 s of aborts, with new clients between them.
RUN_S = 240


def test_transactions_with_offsets_commit_after_each_broker_restart(tmp_path: Path) -> None:
    home = tmp_path / "kafka"
    cmd = [sys.executable, "-m", "tests.kafka.txn_across_restart", str(home), "--restarts", "2"]
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=RUN_S)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        pytest.fail(f"a transaction hung after a broker restart (over {RUN_S} s):\n{out}")
    finally:
        LocalBroker(home, 0, 0).stop()  # the broker it started, whatever became of it
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    committed = [line for line in done.stdout.splitlines() if "committed in" in line]
    assert len(committed) == 9, done.stdout
    assert done.stdout.rstrip().endswith("all committed")
