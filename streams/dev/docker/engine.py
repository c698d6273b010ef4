"""A Docker engine to talk to: the one running, else Debian's ``dockerd`` started as root.

The engine is started only where none answers, and stopped by ``close()`` only if it was started
here. Its log goes to ``.run/dockerd.log``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LOG = ROOT / ".run" / "dockerd.log"
INSTALL_HINT = "run `bash scripts/install-docker.sh` (as root) to install Debian's docker.io"


class DockerUnavailable(RuntimeError):
    """No Docker engine can be reached or started; the message says what to do."""


def answers(timeout_s: float = 20.0) -> bool:
    """Whether a Docker engine answers the ``docker`` client now."""
    if shutil.which("docker") is None:
        return False
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


class DockerEngine:
    """``DockerEngine.ensure()`` returns once an engine answers; ``close()`` stops it if it was
    started by ``ensure``."""

    def __init__(self, process: subprocess.Popen[bytes] | None) -> None:
        self.process = process

    @classmethod
    def ensure(cls, timeout_s: float = 60.0) -> DockerEngine:
        if answers():
            return cls(None)
        if shutil.which("docker") is None or shutil.which("dockerd") is None:
            raise DockerUnavailable(f"no Docker client or engine on PATH; {INSTALL_HINT}")
        if os.geteuid() != 0:
            raise DockerUnavailable(
                "no Docker engine answers and starting one (dockerd) needs root; start Docker "
                "or run the tests as root"
            )
        LOG.parent.mkdir(parents=True, exist_ok=True)
        with open(LOG, "ab") as log:
            process = subprocess.Popen(
                ["dockerd"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout_s
        while not answers(timeout_s=5.0):
            if process.poll() is not None:
                raise DockerUnavailable(
                    f"dockerd exited with {process.returncode} at start; its log: {LOG}"
                )
            if time.monotonic() > deadline:
                process.kill()
                raise DockerUnavailable(f"dockerd did not answer within {timeout_s:g} s; {LOG}")
            time.sleep(0.5)
        return cls(process)

    @property
    def started_here(self) -> bool:
        return self.process is not None

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop the engine if ``ensure`` started it (SIGTERM, SIGKILL after ``timeout_s``)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
