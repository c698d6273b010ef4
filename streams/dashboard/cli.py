"""`tidemark dashboard` (and `python -m streams.dashboard`): its options, and serving the status
page until SIGTERM or Ctrl-C."""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass
from types import FrameType
from typing import Annotated, Any

import typer

from streams import buildinfo
from streams.cli_aliases import run_as_program
from streams.dashboard.server import DEFAULT_HOST, DEFAULT_PORT, DashboardServer
from streams.errors import TidemarkError
from streams.kafka.settings import KafkaSettings
from streams.ports import cannot_listen

log = logging.getLogger(__name__)


def serve(
    settings: KafkaSettings,
    prefix: str,
    host: str,
    port: int,
    stop: threading.Event | None = None,
) -> None:
    """Run the status page until `stop` is set (or Ctrl-C when no event is given)."""
    stop = stop or threading.Event()
    server = DashboardServer(settings, prefix, host, port).start()
    # Many rows allocated per refresh, almost no cycles: as the coordinator (eos.GC_THRESHOLD).
    gc.set_threshold(50_000, 20, 100)
    log.info(
        "tidemark dashboard %s: serving %s (topics %s.*, Kafka %s)",
        buildinfo.version(), server.url, prefix, settings.bootstrap_servers,
    )  # fmt: skip
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        log.info("tidemark dashboard: stopped")


@dataclass(frozen=True)
class DashboardArgs:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    prefix: str = "tidemark"
    bootstrap_servers: str | None = None
    log_level: str = "INFO"


def dashboard(
    host: Annotated[str, typer.Option(help="address to bind")] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(min=0, max=65535, help="port to bind")] = DEFAULT_PORT,
    prefix: Annotated[
        str | None, typer.Option(help="topic prefix [env TIDEMARK_TOPIC_PREFIX, tidemark]")
    ] = None,
    bootstrap_servers: Annotated[
        str | None,
        typer.Option(help="Kafka bootstrap servers [env KAFKA_BOOTSTRAP_SERVERS, 127.0.0.1:9092]"),
    ] = None,
    log_level: Annotated[str, typer.Option(help="logging level")] = "INFO",
) -> None:
    """Serve Tidemark's read-only status page, built from the cluster's topics (on 127.0.0.1
    unless --host says otherwise); SIGTERM or Ctrl-C stops it."""
    raise typer.Exit(run(_args(host, port, prefix, bootstrap_servers, log_level)))


def _args(
    host: str, port: int, prefix: str | None, bootstrap_servers: str | None, log_level: str
) -> DashboardArgs:
    prefix = prefix or os.environ.get("TIDEMARK_TOPIC_PREFIX") or "tidemark"
    return DashboardArgs(host, port, prefix, bootstrap_servers, log_level)


def _command() -> Any:
    single = typer.Typer(add_completion=False, rich_markup_mode=None)
    single.command()(dashboard)
    return typer.main.get_command(single)


def parse_args(argv: list[str] | None) -> DashboardArgs:
    """The options `argv` gives, as `dashboard` reads them."""
    params = _command().make_context("tidemark dashboard", list(argv or [])).params
    return _args(**params)


def main(argv: list[str] | None = None) -> int:
    """`tidemark dashboard`: serve until SIGTERM or Ctrl-C; 0 on a clean stop, 1 on error, 2
    for bad options."""
    return run_as_program(_command(), argv, "tidemark dashboard")


def run(args: DashboardArgs) -> int:
    """Serve the status page these options describe until SIGTERM or Ctrl-C."""
    logging.basicConfig(level=args.log_level.upper(), format="%(message)s")
    settings = KafkaSettings.from_env()
    if args.bootstrap_servers:
        settings = dataclasses.replace(settings, bootstrap_servers=args.bootstrap_servers)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        serve(settings, args.prefix, args.host, args.port, stop)
    except OSError as exc:
        error = cannot_listen(args.host, args.port, "the status page", "--port", exc)
        print(f"tidemark dashboard: {error}", file=sys.stderr)
        return 1
    except TidemarkError as exc:
        print(f"tidemark dashboard: {exc}", file=sys.stderr)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
