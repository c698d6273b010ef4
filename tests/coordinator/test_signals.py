"""SIGTERM reaches the confluent engine's stop at once, even while the main thread is busy in
a long call (streams.coordinator.confluent.signals); a subprocess, so that this process's signal
mask is left alone."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

SCRIPT = """
import os, sys, threading, time
from streams.coordinator.confluent.signals import block_stop_signals, serve_stop_signals

block_stop_signals()
worker = threading.Thread(target=time.sleep, args=(60,), daemon=True)  # started after: blocked too
worker.start()
stopped = threading.Event()
serve_stop_signals(lambda: (print(threading.current_thread().name, flush=True), stopped.set()))
print("ready", flush=True)
# The main thread blocked in a wait that no Python handler interrupts (the signals are blocked
# here, as they are while the engine's loop sits in a librdkafka call).
sys.exit(0 if stopped.wait(30) else 3)
"""


def test_sigterm_is_served_on_its_own_thread_while_the_main_thread_waits() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0  # the default action would have killed it (-15)
    assert time.monotonic() - began < 5
    assert proc.stdout.read().split() == ["stop-signals"]
