"""The confluent engine's web endpoint: `/health` and `/metrics`, on a thread of its own.

Faust's engine serves the same two pages through Faust's web server; this one has no Faust,
so a small standard-library server does it. Both pages read snapshots, never the store.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger("streams.coordinator")


class HealthServer:
    def __init__(
        self,
        host: str,
        port: int,
        health: Callable[[], dict[str, Any]],
        registry: CollectorRegistry,
    ) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/health":
                    body = json.dumps(server.health()).encode()
                    self._send(200, "application/json", body)
                elif self.path == "/metrics":
                    self._send(200, CONTENT_TYPE_LATEST, generate_latest(server.registry))
                else:
                    self._send(404, "text/plain", b"not found: /health and /metrics only\n")

            def _send(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("web: " + format, *args)

        self.health = health
        self.registry = registry
        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="coordinator-web", daemon=True
        )

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
