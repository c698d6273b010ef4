"""An OTLP/HTTP metrics receiver for tests: proves every payload is valid OTLP/JSON.

Each POST to ``/v1/metrics`` is parsed with ``json_format.Parse`` into the official
``ExportMetricsServiceRequest`` (unknown or misspelled fields fail the parse) and kept.
It can be told to fail (answer a status such as 503) or to stall, so that tests can see
the pipeline's ``export`` nack and its timeouts.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

PATH = "/v1/metrics"


class OtlpReceiver:
    """A threaded HTTP server on a free 127.0.0.1 port; ``url`` is its metrics endpoint."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[ExportMetricsServiceRequest] = []
        self._bodies: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.attempts = 0
        self.fail_status: int | None = None
        self.stall_s = 0.0
        self._released = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="otlp-receiver", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{PATH}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Release stalled requests, stop serving and join every thread."""
        self._released.set()
        self._server.shutdown()
        self._server.server_close()  # joins the request threads (block_on_close)
        self._thread.join(timeout=5)

    def requests(self) -> list[ExportMetricsServiceRequest]:
        """The parsed requests answered with success, in arrival order."""
        with self._lock:
            return list(self._requests)

    def bodies(self) -> list[dict[str, Any]]:
        """The raw JSON bodies of ``requests()``, to check the encoding itself."""
        with self._lock:
            return list(self._bodies)

    def wait_for(self, count: int, timeout_s: float = 10.0) -> list[ExportMetricsServiceRequest]:
        """Wait until ``count`` requests were received; raises ``TimeoutError`` otherwise."""
        deadline = time.monotonic() + timeout_s
        while len(received := self.requests()) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(received)} of {count} OTLP requests after {timeout_s} s")
            time.sleep(0.02)
        return received

    def __enter__(self) -> OtlpReceiver:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _receive(self, path: str, content_type: str, body: bytes) -> tuple[int, str]:
        """Decide the answer to one POST: ``(status, JSON body)``."""
        with self._lock:
            self.attempts += 1
        if self.stall_s:
            self._released.wait(self.stall_s)
        if self.fail_status is not None:
            return self.fail_status, json.dumps({"message": "told to fail"})
        problem = None
        if path != PATH:
            problem = 404, f"unexpected path {path}"
        elif content_type.split(";")[0].strip() != "application/json":
            problem = 415, f"unexpected Content-Type {content_type!r}"
        else:
            try:
                parsed = json_format.Parse(body, ExportMetricsServiceRequest())
                raw = json.loads(body)
            except (json_format.ParseError, ValueError) as exc:
                problem = 400, f"not valid OTLP/JSON: {exc}"
        with self._lock:
            if problem is not None:
                self.errors.append(problem[1])
                return problem[0], json.dumps({"message": problem[1]})
            self._requests.append(parsed)
            self._bodies.append(raw)
        return 200, "{}"


def _handler_class(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status, answer = receiver._receive(
                self.path, self.headers.get("Content-Type", ""), body
            )
            payload = answer.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            # The client may have given up (its read timeout): expected in timeout tests.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean; failures are recorded in receiver.errors

    return Handler
