"""The chaos run's processes: the synthetic workers and the coordinators it kills and restarts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from streams.kafka.settings import KafkaSettings
from tests.support.coordinator import CoordinatorProcess

SESSION_TIMEOUT_MS = 6000


def say(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", flush=True)


class Worker:
    def __init__(self, kafka: KafkaSettings, prefix: str, log: Path, name: str) -> None:
        self.name, self.log = name, log
        self.cmd = [
            sys.executable, "-m", "streams", "worker", "--pipeline", "synthetic",
            "--prefix", prefix, "--bootstrap-servers", kafka.bootstrap_servers,
            "--concurrency", "16", "--buffer", os.environ.get("CHAOS_WORKER_BUFFER", "64"),
            "--session-timeout-ms", str(SESSION_TIMEOUT_MS),
            "--option", "latency_ms=20", "--option", "failure_probability=0.05",
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Worker:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, within_s: float = 30) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(within_s)
            except subprocess.TimeoutExpired:
                self.kill()

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()


class Managed:
    """A coordinator or a worker the run kills and restarts."""

    def __init__(self, name: str, proc: CoordinatorProcess | Worker, data: Path | None) -> None:
        self.name, self.proc, self.data = name, proc, data
        self.lock = threading.Lock()
        self.stopped = False  # SIGSTOPped: not to be killed or counted as exited
        self.down = False  # killed, waiting for its restart
        self.log_from = 0  # where its log stood when it last started

    def start(self) -> None:
        self.log_from = self.proc.log.stat().st_size if self.proc.log.exists() else 0
        self.proc.start()

    def output(self, chars: int = 20_000) -> str:
        """What it wrote (stdout and stderr) since it last started, up to `chars`."""
        with open(self.proc.log, "rb") as log:
            log.seek(max(self.log_from, log.seek(0, os.SEEK_END) - chars))
            return log.read().decode(errors="replace")

    def kill(self) -> None:
        self.proc.kill()

    def stop(self) -> None:
        if isinstance(self.proc, CoordinatorProcess):
            if self.proc.exited() is None:
                try:
                    self.proc.stop(within_s=20)
                except AssertionError as exc:
                    say(f"{self.name}: {exc}")
        else:
            self.proc.stop()
