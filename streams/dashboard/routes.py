"""What the status page answers at each path: `GET /`, `GET /api/state`, `GET /api/streams`
(streams.dashboard.api), `GET /api/streams/<id>/timeline` (streams.dashboard.timeline),
`GET /api/sources` (streams.dashboard.sources), `GET /healthz` and `GET /metrics` (the page's
own, streams.dashboard.metrics) are the whole surface;
other paths get 404 (other methods 405, in streams.dashboard.httpd). Pure but for the site it
asks.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST

from streams.dashboard import api, page, timeline
from streams.dashboard.sources import sources_response
from streams.dashboard.state import Snapshot, state_document

HTML = "text/html; charset=utf-8"
JSON = "application/json"
METRICS = CONTENT_TYPE_LATEST


class Site(Protocol):
    """What the routes ask of the running status page (streams.dashboard.server)."""

    clock: Callable[[], int]

    def snapshot(self) -> Snapshot: ...
    def timeline(self, path: str) -> tuple[HTTPStatus, dict[str, Any]]: ...
    def health(self, now_ms: int) -> tuple[HTTPStatus, dict[str, Any]]: ...
    def metrics(self) -> bytes: ...
    def served(self, path: str, status: int) -> None: ...


@dataclass(frozen=True)
class Response:
    status: HTTPStatus
    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)


def json_response(
    status: HTTPStatus, doc: dict[str, Any], headers: dict[str, str] | None = None
) -> Response:
    body = json.dumps(doc, separators=(",", ":")).encode()
    return Response(status, body, JSON, headers or {})


def route(site: Site, path: str, query: str) -> Response:
    """The answer to `GET path?query`."""
    if path == "/":
        return Response(
            HTTPStatus.OK,
            page.HTML,
            HTML,
            {"Content-Security-Policy": page.CONTENT_SECURITY_POLICY},
        )
    if path == "/api/state":
        return json_response(HTTPStatus.OK, state_document(site.snapshot(), site.clock()))
    if path == "/api/streams":
        return json_response(*api.streams_response(site.snapshot(), query, site.clock()))
    if path == "/api/sources":
        return json_response(*sources_response(site.snapshot().sources, query, site.clock()))
    if timeline.is_timeline_path(path):
        return json_response(*site.timeline(path))
    if path == "/healthz":
        return json_response(*site.health(site.clock()))
    if path == "/metrics":
        return Response(HTTPStatus.OK, site.metrics(), METRICS)
    return json_response(HTTPStatus.NOT_FOUND, {"error": "not found"})
