"""A real Prometheus for tests: backfilled with ``promtool``, on a free port, in its own folder.

Data goes in before the server starts, as OpenMetrics text that ``promtool tsdb
create-blocks-from openmetrics`` turns into blocks in the data folder; the server then
serves them from disk. Use timestamps a few hours in the past: the blocks are read as they
are, and retention (30 days here) only drops data older than that.

The server is started with a short ``--query.lookback-delta`` (10 s by default, below the
usual 15 s step): a range query step then sees only a sample at that very step, so the
"last data point" of a series is its last real sample, not a 5-minute stale echo of it.

``stop()`` and ``start()`` may be called again and again: the same port and data folder come
back, as an end-to-end test needs when it takes the source away mid-run.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from streams.dev.broker import free_port

INSTALL_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install-system-deps.sh"

_CONFIG = "global:\n  scrape_interval: 15s\n# No scrape jobs: every sample comes from backfill.\n"


@dataclass(frozen=True)
class Sample:
    """One raw sample: a metric name, its labels, a time in epoch ms and a value."""

    metric: str
    t_ms: int
    value: float
    labels: Mapping[str, str] = field(default_factory=dict)


def binaries() -> tuple[str, str]:
    """Paths of ``prometheus`` and ``promtool``, installing Debian's package when run as root."""
    found = shutil.which("prometheus"), shutil.which("promtool")
    if (None in found) and os.geteuid() == 0:
        subprocess.run(["bash", str(INSTALL_SCRIPT)], check=True, stdin=subprocess.DEVNULL)
        found = shutil.which("prometheus"), shutil.which("promtool")
    prometheus, promtool = found
    if prometheus is None or promtool is None:
        raise RuntimeError(
            f"prometheus/promtool not found; install them with: sudo {INSTALL_SCRIPT}"
        )
    return prometheus, promtool


def openmetrics(samples: Iterable[Sample]) -> str:
    """The OpenMetrics text of ``samples``, grouped by metric family as the format requires."""
    families: dict[str, list[Sample]] = {}
    for sample in samples:
        families.setdefault(sample.metric, []).append(sample)
    lines = []
    for metric, members in families.items():
        lines.append(f"# TYPE {metric} gauge")
        for s in sorted(members, key=lambda s: (sorted(s.labels.items()), s.t_ms)):
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(s.labels.items()))
            selector = f"{metric}{{{labels}}}" if labels else metric
            lines.append(f"{selector} {_number(s.value)} {s.t_ms / 1000:.3f}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


class PrometheusServer:
    """One Prometheus process on 127.0.0.1, its data folder and log under ``root``."""

    def __init__(self, root: Path, *, lookback_delta: str = "10s") -> None:
        self.root = root
        self.data_dir = root / "data"
        self.log_file = root / "prometheus.log"
        self.port = free_port()
        self._lookback_delta = lookback_delta
        self._prometheus, self._promtool = binaries()
        self._process: subprocess.Popen[bytes] | None = None
        self._backfills = 0
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (root / "prometheus.yml").write_text(_CONFIG)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def backfill(self, samples: Iterable[Sample]) -> None:
        """Write ``samples`` as TSDB blocks; only while stopped, since blocks load at start."""
        if self._process is not None:
            raise RuntimeError("backfill() needs a stopped server: blocks are loaded at start")
        self._backfills += 1
        source = self.root / f"backfill-{self._backfills}.om"
        source.write_text(openmetrics(samples))
        done = subprocess.run(
            [self._promtool, "tsdb", "create-blocks-from", "openmetrics", source, self.data_dir],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"promtool backfill failed:\n{done.stdout}{done.stderr}")

    def start(self, timeout_s: float = 30.0) -> None:
        """Start the server and wait until ``/-/ready`` answers 200."""
        if self._process is not None:
            raise RuntimeError("Prometheus is already started")
        with self.log_file.open("ab") as log:
            self._process = subprocess.Popen(
                [
                    self._prometheus,
                    f"--config.file={self.root / 'prometheus.yml'}",
                    f"--storage.tsdb.path={self.data_dir}",
                    "--storage.tsdb.retention.time=30d",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    f"--query.lookback-delta={self._lookback_delta}",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout_s
        while not self._ready():
            if self._process.poll() is not None:
                code = self._process.returncode
                self._process = None
                raise RuntimeError(f"Prometheus exited with {code}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"Prometheus not ready in {timeout_s} s:\n{self.log_tail()}")
            time.sleep(0.1)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout_s``) and reap it."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> PrometheusServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                return int(response.status) == 200
        except (urllib.error.URLError, OSError):
            return False


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
