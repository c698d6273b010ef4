"""`make run`: the whole of Tidemark on a local broker, with demo streams and a live view.

It starts the local Kafka broker (unless one already runs on 127.0.0.1:9092), creates the
topics, starts a coordinator, two workers on the synthetic pipeline and the status page, and
registers demo streams: one live, one catching up with several windows in flight, and one
whose source is down for a while (it retries, is bypassed, then recovers). It shows every
stream's progress until Ctrl-C (or for RUN_SECONDS seconds), then stops everything it started.

Everything runs with the defaults (prefix `tidemark`, broker 127.0.0.1:9092), so the CLI in
another terminal sees the same cluster: `tidemark streams list`, `tidemark replay ...`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.table import Table

from streams.clock import now_ms
from streams.core import Delete, StreamConfig, Upsert, config_from_dict
from streams.dev.broker import KAFKA_VERSION, ROOT, dev_broker
from streams.errors import TidemarkError
from streams.humanize import format_duration, format_time
from streams.kafka.admin import create_topics, wait_ready
from streams.kafka.settings import KafkaSettings
from streams.kafka.topic_io import send_all
from streams.readmodel import ReadModel, ReadView
from streams.topics import Topics
from streams.wire import encode_control, stream_key

RUN_DIR = ROOT / ".run" / "demo"
COORDINATOR_PORT = 6066
WORKER_PORTS = (9101, 9102)
DASHBOARD_PORT = 8080
console = Console()


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path


def demo_streams(now: int) -> list[StreamConfig]:
    """The demo's streams (5 s windows, so that progress shows at once)."""
    quick = {"window_ms": 5000, "step_ms": 5000, "task_timeout_ms": 5000}
    minute = now - now % 60_000
    configs = [
        {"stream_id": "demo-live", "start_ms": minute - 60_000, **quick,
         "params": {"latency_ms": 100}},
        {"stream_id": "demo-catching-up", "start_ms": minute - 30 * 60_000, **quick,
         "max_in_flight": 4, "params": {"latency_ms": 150}},
        # Its source is down for the first 20 s: nacks, retries every second, a bypass after
        # 6 s of failure, then it recovers.
        {"stream_id": "demo-outage", "start_ms": minute - 60_000, **quick,
         "bypass_after_ms": 6000, "retry": {"strategy": "fixed", "interval_ms": 1000},
         "params": {"latency_ms": 100, "outage_until_ms": now + 20_000}},
    ]  # fmt: skip
    return [config_from_dict(config) for config in configs]


class Demo:
    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.settings = KafkaSettings.from_env()
        self.topics = Topics(os.environ.get("TIDEMARK_TOPIC_PREFIX") or "tidemark")
        self.children: list[Child] = []

    def run(self) -> int:
        with ExitStack() as stack:
            stack.enter_context(self._broker())
            create_topics(self.settings, self.topics.specs(6, 1))
            stack.callback(self._stop_children)
            self._start_processes()
            self._register_streams()
            model = ReadModel(self.settings, self.topics.prefix)
            stack.callback(model.close)
            self._show(model)
        return 0

    @contextmanager
    def _broker(self) -> Iterator[None]:
        if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
            wait_ready(self.settings, timeout_s=10)
            yield
            return
        broker = dev_broker()
        if broker.running_pid() is not None:
            wait_ready(self.settings, timeout_s=30)
            console.print(f"using the running broker on {broker.bootstrap_servers}")
            yield
            return
        console.print(f"starting Kafka {KAFKA_VERSION} on 127.0.0.1:9092 ...")
        try:
            broker.start()  # inside: Ctrl-C while it waits must stop the JVM it launched
            yield
        finally:
            with suppress(OSError):  # the terminal may be gone (SIGHUP)
                console.print("stopping Kafka ...")
            broker.stop()

    def _spawn(self, name: str, *args: str) -> None:
        log = RUN_DIR / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches us; we stop them in order
                env={**os.environ, "KAFKA_BOOTSTRAP_SERVERS": self.settings.bootstrap_servers},
            )
        self.children.append(Child(name, proc, log))

    def _start_processes(self) -> None:
        shutil.rmtree(RUN_DIR, ignore_errors=True)
        RUN_DIR.mkdir(parents=True)
        prefix = self.topics.prefix
        self._spawn("coordinator", "-m", "streams", "coordinator", "--log-level", "warn",
                    "--data-dir", str(RUN_DIR / "coordinator-data"),
                    "--port", str(COORDINATOR_PORT))  # fmt: skip
        for i, port in enumerate(WORKER_PORTS, 1):
            self._spawn(f"worker-{i}", "-m", "streams.worker", "--pipeline", "synthetic",
                        "--prefix", prefix, "--concurrency", "4",
                        "--port", str(port))  # fmt: skip
        self._spawn("dashboard", "-m", "streams.dashboard", "--prefix", prefix,
                    "--port", str(DASHBOARD_PORT))  # fmt: skip
        console.print(
            f"coordinator: http://127.0.0.1:{COORDINATOR_PORT}/metrics  workers: "
            + "  ".join(f"http://127.0.0.1:{p}/metrics" for p in WORKER_PORTS)
            + f"\nstatus page: http://127.0.0.1:{DASHBOARD_PORT}   logs: {RUN_DIR}"
        )

    def _register_streams(self) -> None:
        # Start each demo afresh: a delete, then the upsert (one partition, in order).
        configs = demo_streams(now_ms())
        records = [
            (stream_key(config.stream_id), encode_control(control))
            for config in configs
            for control in (Delete(config.stream_id), Upsert(config))
        ]
        send_all(self.settings, self.topics.control, records)
        console.print("registered demo streams: " + ", ".join(c.stream_id for c in configs))

    def _show(self, model: ReadModel) -> None:
        deadline = None if self.seconds is None else time.monotonic() + self.seconds
        interactive = console.is_terminal
        last_print = 0.0
        with Live(console=console, auto_refresh=False) as live:
            while deadline is None or time.monotonic() < deadline:
                self._check_children()
                model.refresh(timeout_s=5)
                if interactive:
                    live.update(render(model.streams(), now_ms()), refresh=True)
                elif time.monotonic() - last_print >= 5:  # a log for scripts and CI
                    last_print = time.monotonic()
                    for line in lines(model.streams(), now_ms()):
                        print(line, flush=True)
                time.sleep(1)
        model.refresh(timeout_s=5)
        for line in lines(model.streams(), now_ms()):
            print(line, flush=True)
        bypassed = model.bypasses()
        print(f"{len(bypassed)} bypassed window(s); replay one with:")
        for bypass in bypassed[:3]:
            print(f"  {bypass.replay_command()}", flush=True)

    def _check_children(self) -> None:
        for child in self.children:
            if child.proc.poll() is not None:
                tail = child.log.read_text(errors="replace")[-2000:]
                raise TidemarkError(f"{child.name} exited with {child.proc.returncode}:\n{tail}")

    def _stop_children(self) -> None:
        try:
            for child in reversed(self.children):
                if child.proc.poll() is None:
                    child.proc.send_signal(signal.SIGTERM)
            for child in self.children:
                try:
                    child.proc.wait(20)
                except subprocess.TimeoutExpired:
                    child.proc.kill()
                    child.proc.wait(10)
        finally:  # a second Ctrl-C cut the wait short: kill what is left (own sessions)
            for child in self.children:
                if child.proc.poll() is None:
                    child.proc.kill()
                    child.proc.wait()
            self.children.clear()


def _row(view: ReadView, now: int) -> dict[str, str]:
    lag = view.lag_ms(now)
    error = view.last_error
    return {
        "stream": view.stream_id,
        "downstream": "-" if view.downstream_ms is None else format_time(view.downstream_ms),
        "lag": "-" if lag is None else format_duration(lag - lag % 1000, parts=2),
        "state": view.state(now),
        "attempt": str(view.attempt),
        "bypasses": str(view.bypasses),
        "last error": "" if error is None else f"{error['kind']}: {error['message']}"[:60],
    }


def lines(views: list[ReadView], now: int) -> list[str]:
    """One plain line per stream, for logs: `stream downstream=... lag=... state=...`."""
    out = []
    for view in sorted(views, key=lambda v: v.stream_id):
        row = _row(view, now)
        name = row.pop("stream")
        fields = " ".join(f"{key.replace(' ', '_')}={value!r}" for key, value in row.items())
        out.append(f"{format_time(now)} {name} {fields}")
    return out


def render(views: list[ReadView], now: int) -> Table:
    table = Table(title=f"Tidemark at {format_time(now)}  (Ctrl-C stops)")
    for column in ("stream", "downstream", "lag", "state", "attempt", "bypasses", "last error"):
        table.add_column(column)
    for view in sorted(views, key=lambda v: v.stream_id):
        table.add_row(*_row(view, now).values())
    return table


def main() -> int:
    raw = os.environ.get("RUN_SECONDS")
    try:
        seconds = float(raw) if raw else None
    except ValueError:
        console.print(f"[red]error:[/] RUN_SECONDS must be a number of seconds, got {raw!r}")
        return 2
    # Ctrl-C, SIGTERM and SIGHUP (the terminal closed) unwind the ExitStack, which stops
    # everything this started: the children run in sessions of their own.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.default_int_handler)
    try:
        return Demo(seconds).run()
    except KeyboardInterrupt:
        console.print("stopped")
        return 0
    except TidemarkError as exc:
        console.print(f"[red]error:[/] {exc}")
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
