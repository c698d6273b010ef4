"""`RUN_SECONDS=40 make run`: the README's first command, on the local broker it starts."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from streams.dev.broker import dev_broker
from streams.dev.demo import COORDINATOR_PORT, DASHBOARD_PORT, WORKER_PORTS

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^\S+ (demo-[\w-]+) downstream='([^']+)' .*bypasses='(\d+)'")

pytestmark = pytest.mark.broker


def test_make_run_shows_progress_and_a_bypass_then_exits_cleanly() -> None:
    if shutil.which("make") is None:
        pytest.fail("make is needed to run the README's command")
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    broker_was_running = dev_broker().running_pid() is not None
    done = subprocess.run(
        ["make", "--no-print-directory", "run"],
        cwd=ROOT,
        env={**env, "RUN_SECONDS": "40"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    downstream: dict[str, list[str]] = {}
    bypasses: dict[str, int] = {}
    for line in output.splitlines():
        if match := LINE.match(line):
            stream, mark, count = match.groups()
            downstream.setdefault(stream, []).append(mark)
            bypasses[stream] = int(count)
    assert set(downstream) == {"demo-live", "demo-catching-up", "demo-outage"}, output[-4000:]
    live = [m for m in downstream["demo-live"] if m != "-"]
    assert len(set(live)) >= 3 and live == sorted(live), live  # progress advances
    assert bypasses["demo-outage"] >= 1, output[-4000:]
    assert re.search(r"^  tidemark replay demo-outage --from \S+ --to \S+$", output, re.M)
    # Nothing it started is left running: its ports are free again, and the broker it started
    # (when none was running before) is gone.
    for port in (COORDINATOR_PORT, *WORKER_PORTS, DASHBOARD_PORT):
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still served"
    if not broker_was_running:
        assert dev_broker().running_pid() is None


class _SlowBroker:
    """A dev broker whose start is interrupted by Ctrl-C after its JVM was launched."""

    bootstrap_servers = "127.0.0.1:9092"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def running_pid(self) -> int | None:
        return None

    def start(self) -> None:
        self.calls.append("start")
        raise KeyboardInterrupt  # Ctrl-C while waiting for the broker to answer

    def stop(self) -> bool:
        self.calls.append("stop")
        return True


def test_ctrl_c_while_the_broker_starts_stops_the_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    from streams.dev import demo

    broker = _SlowBroker()
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setattr(demo, "dev_broker", lambda: broker)
    with pytest.raises(KeyboardInterrupt), demo.Demo(None)._broker():
        pass
    assert broker.calls == ["start", "stop"]


_STUBBORN = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


class _InterruptedWait(subprocess.Popen[bytes]):
    """A child whose graceful wait is cut short by a second Ctrl-C."""

    def wait(self, timeout: float | None = None) -> int:
        if timeout is not None:
            raise KeyboardInterrupt
        return super().wait(timeout)


def test_a_second_ctrl_c_while_stopping_leaves_no_child_behind(tmp_path: Path) -> None:
    import sys

    from streams.dev import demo

    run = demo.Demo(None)
    for name, popen in (("first", _InterruptedWait), ("second", subprocess.Popen)):
        proc = popen([sys.executable, "-c", _STUBBORN], stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        run.children.append(demo.Child(name, proc, tmp_path / f"{name}.log"))
    procs = [child.proc for child in run.children]
    try:
        with pytest.raises(KeyboardInterrupt):
            run._stop_children()
        assert [p.poll() is not None for p in procs] == [True, True]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                subprocess.Popen.wait(proc)
            if proc.stdout is not None:
                proc.stdout.close()


_HUNG_UP = """
import contextlib, subprocess, sys, time
from pathlib import Path
from streams.dev import demo

class Started(demo.Demo):
    def run(self) -> int:
        with contextlib.ExitStack() as stack:
            stack.callback(self._stop_children)
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                     start_new_session=True)
            self.children.append(demo.Child("child", child, Path("/dev/null")))
            print(child.pid, flush=True)
            time.sleep(60)
        return 0

demo.Demo = Started
sys.exit(demo.main())
"""


def test_closing_the_terminal_stops_what_it_started() -> None:
    """SIGHUP (the terminal window closed) must unwind like Ctrl-C: the children run in their
    own sessions, so nothing else stops them."""
    import sys

    run = subprocess.Popen([sys.executable, "-c", _HUNG_UP], stdout=subprocess.PIPE, cwd=ROOT)
    assert run.stdout is not None
    child = int(run.stdout.readline())
    try:
        run.send_signal(signal.SIGHUP)
        run.wait(30)
        assert not _running(child), "the demo's child outlived it"
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        run.stdout.close()
        if _running(child):
            os.kill(child, signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"
