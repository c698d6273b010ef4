"""`tidemark dashboard` (and `python -m streams.dashboard`): its options, and serving the status
page until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import logging
import os
import signal
import sys
import threading
from types import FrameType

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
    log.info("tidemark dashboard: serving %s (topics %s.*)", server.url, prefix)
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port number (0 to 65535)")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tidemark dashboard",
        description="Serve Tidemark's read-only status page, built from the cluster's topics.",
    )
    parser.add_argument(
        "--host", default=DEFAULT_HOST, help="address to bind (default: %(default)s)"
    )
    parser.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help="port to bind (default: %(default)s)"
    )
    parser.add_argument(
        "--prefix",
        default=os.environ.get("TIDEMARK_TOPIC_PREFIX") or "tidemark",
        help="topic prefix (default: $TIDEMARK_TOPIC_PREFIX or %(default)s)",
    )
    parser.add_argument(
        "--bootstrap-servers",
        default=None,
        help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP_SERVERS or 127.0.0.1:9092)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """`tidemark dashboard`: serve until SIGTERM or Ctrl-C; 0 on a clean stop, 1 on error."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
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
