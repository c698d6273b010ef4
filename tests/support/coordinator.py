"""A `tidemark coordinator` process for tests: started, health-checked, stopped or killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from streams.dev.broker import free_port
from streams.kafka.settings import KafkaSettings


class CoordinatorProcess:
    def __init__(
        self,
        kafka: KafkaSettings,
        prefix: str,
        data_dir: Path,
        log: Path,
        partitions: int = 3,
        flush_ms: int = 200,
        engine: str = "confluent",
        env: dict[str, str] | None = None,
    ) -> None:
        self.engine = engine
        self.port = free_port()
        self.log = log
        self.env = {
            **os.environ,
            "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
            "TIDEMARK_TOPIC_PREFIX": prefix,
            "TIDEMARK_DATA_DIR": str(data_dir),
            "TIDEMARK_PARTITIONS": str(partitions),
            "TIDEMARK_FLUSH_MS": str(flush_ms),
            "TIDEMARK_WEB_PORT": str(self.port),
            "TIDEMARK_ENGINE": engine,
            **(env or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None
        # The working directory: `python -m streams` imports `streams` from it first, before
        # PYTHONPATH (None: this process's).
        self.cwd: Path | None = None

    def start(self) -> CoordinatorProcess:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "streams", "coordinator", "--log-level", "info"],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.cwd,
            )
        return self

    def health(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                doc: dict[str, Any] = json.loads(r.read())
                return doc
        except OSError:
            return None

    def wait_ready(self, timeout_s: float = 60, partitions: int | None = None) -> dict[str, Any]:
        """Until /health says ok with partitions assigned (exactly `partitions` if given)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise AssertionError(f"coordinator exited; log:\n{self.tail()}")
            doc = self.health()
            owned = len(doc["partitions"]) if doc else 0
            if doc and doc["status"] == "ok" and owned and owned == (partitions or owned):
                return doc
            time.sleep(0.2)
        raise AssertionError(f"coordinator not ready in {timeout_s} s; log:\n{self.tail()}")

    def stop(self, within_s: float = 10) -> float:
        """SIGTERM; return how long it took. Fails if it takes longer than `within_s`."""
        assert self.proc is not None
        began = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(within_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"coordinator ignored SIGTERM for {within_s} s") from None
        return time.monotonic() - began

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but does nothing (a zombie in the making)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""
