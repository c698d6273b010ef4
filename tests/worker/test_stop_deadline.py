"""A worker whose stop cannot finish (a broker that stopped answering) still exits in time."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

SCRIPT = """
import logging, threading, time
from streams.worker.runner import _signals_stop
logging.basicConfig(level=logging.INFO)
with _signals_stop(lambda: None, deadline_s=0.5):
    print("ready", flush=True)
    time.sleep(30)  # a stop that never finishes, like a commit to a frozen broker
"""


def test_a_stop_that_cannot_finish_exits_with_status_1_at_its_deadline() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        assert proc.returncode == 1
        assert 0.4 < time.monotonic() - began < 5
        assert "could not stop cleanly within 0.5 s" in (proc.stderr.read() if proc.stderr else "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
