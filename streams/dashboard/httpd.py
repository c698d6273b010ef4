"""The status page's HTTP transport: stdlib, one thread per connection, GET only.

It ends open connections when closed (an idle one would hold its thread forever), refuses
other Host names when bound to loopback (so a rebound DNS name cannot read the page), and
sends every answer (streams.dashboard.routes) with the same security headers.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from streams.dashboard.routes import Response, Site, json_response, route

log = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


class DashboardHTTPServer(ThreadingHTTPServer):
    """Serves `site` at `address`; `server_close()` also ends open connections."""

    daemon_threads = True

    def __init__(self, site: Site, address: tuple[str, int]) -> None:
        self.site = site
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
    server: DashboardHTTPServer
    server_version = "tidemark-dashboard"

    def version_string(self) -> str:
        return self.server_version

    def do_GET(self) -> None:
        if not self._host_allowed():
            self._send(
                Response(HTTPStatus.FORBIDDEN, b"forbidden host\n", "text/plain; charset=utf-8")
            )
            return
        path, query = urlsplit(self.path)[2:4]
        response = route(self.server.site, path, query)
        self.server.site.served(path, response.status)
        self._send(response)

    def __getattr__(self, name: str) -> Any:
        # BaseHTTPRequestHandler answers 501 for a method without a do_* handler; every
        # method but GET is refused with 405 instead, even ones nobody has heard of.
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        refused = {"error": "method not allowed"}
        self._send(json_response(HTTPStatus.METHOD_NOT_ALLOWED, refused, {"Allow": "GET"}))

    def _host_allowed(self) -> bool:
        """On loopback, refuse other Host names, so a rebound DNS name cannot read the page."""
        host = self.headers.get("Host")
        if not self.server.loopback_only or not host:
            return True
        name = host[1 : host.find("]")] if host.startswith("[") else host.rsplit(":", 1)[0]
        return name.lower() in LOOPBACK_NAMES

    def _send(self, response: Response) -> None:
        body = response.body
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        # The page polls every second: request lines go to debug, not to stderr.
        log.debug("dashboard: %s " + format, self.address_string(), *args)
