"""The status page's HTTP server: read-only, stdlib only, bound to 127.0.0.1 by default.

One refresher thread owns the read model: it calls `refresh()` every second and keeps a
snapshot, and a table of the streams into which it copies only the views that changed since
the last refresh; request threads only read them (a timeline reads its one stream's view and
listed bypasses from the model, under its lock). `GET /`, `GET /api/state`, `GET
/api/streams` (streams.dashboard.api), `GET /api/streams/<id>/timeline`
(streams.dashboard.timeline) and `GET /healthz` are the whole surface: other paths get 404,
other methods 405.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

from streams.clock import now_ms
from streams.dashboard import api, page, timeline
from streams.dashboard.state import ReadModelSource, Snapshot, state_document
from streams.dashboard.table import StreamTable
from streams.errors import TidemarkError
from streams.kafka.settings import KafkaSettings
from streams.outages import HealthReader, SourceOutage
from streams.topics import Topics

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
STALE_AFTER_MS = 10_000
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


class DashboardServer:
    """The status page in background threads: `start()`, then `url`, then `stop()` (once).

    Give it Kafka `settings` and a topic `prefix` to read the cluster, or a ready `model`
    (tests). It owns the model either way and closes it on `stop()`. Port 0 picks a free one.
    """

    def __init__(
        self,
        settings: KafkaSettings | None = None,
        prefix: str = "tidemark",
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        *,
        model: ReadModelSource | None = None,
        refresh_interval_s: float = 1.0,
        clock: Callable[[], int] = now_ms,
        outages: Callable[[int], list[SourceOutage]] | None = None,
        commits: timeline.CommitHistory | None = None,
    ) -> None:
        self.settings = settings or KafkaSettings()
        self.prefix = prefix
        self.host = host
        self.port = port
        self.refresh_interval_s = refresh_interval_s
        self.clock = clock
        self._model = model
        self._outages = outages  # the sources in outage at a time; None: read from `health`
        self._health: HealthReader | None = None
        self._commits = commits  # the timeline's reads of `commits`; None: read from the topic
        self._table = StreamTable()  # shared by every snapshot; changed in place, locked
        self._snapshot = Snapshot(self._table)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        """The page's address, with the bound port (useful with port 0)."""
        if self._httpd is None:
            raise RuntimeError("the dashboard server is not started")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._httpd.server_address[1]}/"

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snapshot

    def start(self) -> DashboardServer:
        """Bind the port (OSError if taken), then serve and refresh in two daemon threads."""
        self._httpd = _HTTPServer(self, (self.host, self.port))
        if self._model is None:
            from streams.readmodel import ReadModel

            try:
                self._model = ReadModel(self.settings, self.prefix)
                if self._outages is None:
                    self._health = HealthReader(self.settings, Topics(self.prefix).health)
                    self._outages = self._health.outages
                if self._commits is None:
                    from streams.dashboard.history import KafkaCommitHistory

                    self._commits = KafkaCommitHistory(self.settings, Topics(self.prefix).commits)
            except BaseException:
                self._httpd.server_close()
                self._httpd = None
                raise
        self._threads = [
            threading.Thread(target=self._refresh_loop, name="dashboard-refresh", daemon=True),
            threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.2},
                name="dashboard-http",
                daemon=True,
            ),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wait for both threads, close the read model. Safe to call twice."""
        self._stopping.set()
        if self._httpd is not None:
            if self._threads:  # shutdown() waits for serve_forever, so only once it runs
                self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        for thread in self._threads:
            thread.join(15)
        self._threads = []
        if self._model is not None:
            self._model.close()
            self._model = None
        for reader in (self._health, self._commits):
            if reader is not None:
                reader.close()
        self._health = self._commits = None

    def __enter__(self) -> DashboardServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _refresh_loop(self) -> None:
        while not self._stopping.is_set():
            self.refresh_once()
            snap = self.snapshot()  # still reading the topics: on at once, not in a second
            behind = not snap.caught_up and snap.refresh_error is None
            self._stopping.wait(0 if behind else self.refresh_interval_s)

    def refresh_once(self) -> None:
        """Catch up with the topics and publish a new snapshot; keep the old one on failure.

        The refresher thread calls it; a test may too, while that thread sleeps (the read
        model wants one refreshing thread at a time).
        """
        model = self._model
        if model is None:
            return
        try:
            model.refresh()
            fresh = Snapshot.read(model, self._table, self.clock())
            if self._outages is not None:
                outages = tuple(self._outages(fresh.refreshed_ms or self.clock()))
                fresh = dataclasses.replace(fresh, outages=outages)
        except Exception as exc:  # the page must keep serving the last good data
            error = f"{type(exc).__name__}: {exc}"[:500]
            if error != self.snapshot().refresh_error:  # log a lasting failure once
                log.warning("dashboard: read model refresh failed: %s", exc)
            with self._lock:
                self._snapshot = dataclasses.replace(self._snapshot, refresh_error=error)
            return
        if self.snapshot().refresh_error is not None:
            log.info("dashboard: read model refresh works again")
        with self._lock:
            self._snapshot = fresh

    def timeline(self, path: str) -> tuple[HTTPStatus, dict[str, Any]]:
        """The answer to `GET /api/streams/<id>/timeline` (streams.dashboard.timeline)."""
        model = self._model
        if model is None:
            return timeline.answer(path, lambda _: None, lambda _: (), self._commits, self.clock())
        return timeline.answer(path, model.stream, model.bypasses_of, self._commits, self.clock())

    def health(self, now_ms: int) -> tuple[HTTPStatus, dict[str, Any]]:
        """200 while refreshes succeed; 503 before the first one, or once they go stale."""
        snap = self.snapshot()
        if snap.refreshed_ms is None:
            return HTTPStatus.SERVICE_UNAVAILABLE, {"status": "starting", "refreshed_ms": None}
        if now_ms - snap.refreshed_ms > STALE_AFTER_MS:
            return HTTPStatus.SERVICE_UNAVAILABLE, {
                "status": "stale",
                "refreshed_ms": snap.refreshed_ms,
            }
        return HTTPStatus.OK, {"status": "ok", "refreshed_ms": snap.refreshed_ms}


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, dashboard: DashboardServer, address: tuple[str, int]) -> None:
        self.dashboard = dashboard
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        # Bound to loopback: requests must also name a loopback host (see _host_allowed).
        self.loopback_only = address[0] in LOOPBACK_NAMES
        # Open connections and the threads serving them, so that server_close() ends them.
        self._open: dict[Any, threading.Thread | None] = {}
        self._open_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open[request] = None
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            if request in self._open:
                self._open[request] = threading.current_thread()
        super().process_request_thread(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def server_close(self) -> None:
        """Also end open connections: an idle one (a browser's spare) blocks its thread in
        reading a request line forever, and request threads are not joined otherwise."""
        super().server_close()
        with self._open_lock:
            still_open = list(self._open.items())
        for request, _ in still_open:
            with contextlib.suppress(OSError):
                request.shutdown(socket.SHUT_RDWR)
        for _, thread in still_open:
            if thread is not None and thread is not threading.current_thread():
                thread.join(5)


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    server_version = "tidemark-dashboard"

    def version_string(self) -> str:
        return self.server_version

    def do_GET(self) -> None:
        if not self._host_allowed():
            self._send(HTTPStatus.FORBIDDEN, b"forbidden host\n", "text/plain; charset=utf-8")
            return
        dashboard = self.server.dashboard
        path, query = urlsplit(self.path)[2:4]
        if path == "/":
            headers = {"Content-Security-Policy": page.CONTENT_SECURITY_POLICY}
            self._send(HTTPStatus.OK, page.HTML, "text/html; charset=utf-8", headers)
        elif path == "/api/state":
            doc = state_document(dashboard.snapshot(), dashboard.clock())
            self._json(HTTPStatus.OK, doc)
        elif path == "/api/streams":
            self._json(*api.streams_response(dashboard.snapshot(), query, dashboard.clock()))
        elif timeline.is_timeline_path(path):
            self._json(*dashboard.timeline(path))
        elif path == "/healthz":
            self._json(*dashboard.health(dashboard.clock()))
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})

    def __getattr__(self, name: str) -> Any:
        # BaseHTTPRequestHandler answers 501 for a method without a do_* handler; every
        # method but GET is refused with 405 instead, even ones nobody has heard of.
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        self._json(HTTPStatus.METHOD_NOT_ALLOWED, {"error": "method not allowed"}, {"Allow": "GET"})

    def _host_allowed(self) -> bool:
        """On loopback, refuse other Host names, so a rebound DNS name cannot read the page."""
        host = self.headers.get("Host")
        if not self.server.loopback_only or not host:
            return True
        name = host[1 : host.find("]")] if host.startswith("[") else host.rsplit(":", 1)[0]
        return name.lower() in LOOPBACK_NAMES

    def _json(
        self, status: HTTPStatus, doc: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        body = json.dumps(doc, separators=(",", ":")).encode()
        self._send(status, body, "application/json", headers)

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        # The page polls every second: request lines go to debug, not to stderr.
        log.debug("dashboard: %s " + format, self.address_string(), *args)


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
        print(
            f"tidemark dashboard: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 1
    except TidemarkError as exc:
        print(f"tidemark dashboard: {exc}", file=sys.stderr)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
