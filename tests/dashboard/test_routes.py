"""Which path answers what (streams.dashboard.routes), over a fake site: no socket."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from streams.dashboard import page
from streams.dashboard.routes import route
from streams.dashboard.state import Snapshot

NOW = 1_800_000_000_000


@dataclass
class FakeSite:
    asked: list[str] = field(default_factory=list)

    def clock(self) -> int:
        return NOW

    def snapshot(self) -> Snapshot:
        return Snapshot.of([], [], NOW - 1)

    def timeline(self, path: str) -> tuple[HTTPStatus, dict[str, Any]]:
        self.asked.append(path)
        return HTTPStatus.OK, {"timeline": path}

    def health(self, now_ms: int) -> tuple[HTTPStatus, dict[str, Any]]:
        return HTTPStatus.OK, {"status": "ok", "now_ms": now_ms}

    def metrics(self) -> bytes:
        return b"# the site's metrics\n"

    def served(self, path: str, status: int) -> None:
        self.asked.append(f"served {path} {status}")


def test_metrics_are_the_sites_in_prometheus_text() -> None:
    answer = route(FakeSite(), "/metrics", "")
    assert answer.status == HTTPStatus.OK
    assert answer.body == b"# the site's metrics\n"
    assert answer.content_type.startswith("text/plain; version=")


def test_the_page_comes_with_its_policy() -> None:
    answer = route(FakeSite(), "/", "")
    assert (answer.status, answer.body, answer.content_type) == (
        HTTPStatus.OK,
        page.HTML,
        "text/html; charset=utf-8",
    )
    assert answer.headers == {"Content-Security-Policy": page.CONTENT_SECURITY_POLICY}


def test_each_api_path_answers_json_at_the_sites_time() -> None:
    site = FakeSite()
    state = route(site, "/api/state", "")
    assert state.content_type == "application/json"
    assert json.loads(state.body)["now_ms"] == NOW
    streams = route(site, "/api/streams", "limit=5")
    assert json.loads(streams.body)["limit"] == 5
    bad = route(site, "/api/streams", "limit=0")
    assert bad.status == HTTPStatus.BAD_REQUEST
    assert json.loads(bad.body)["parameter"] == "limit"
    assert json.loads(route(site, "/api/streams/s/timeline", "").body) == {
        "timeline": "/api/streams/s/timeline"
    }
    assert site.asked == ["/api/streams/s/timeline"]
    assert json.loads(route(site, "/healthz", "").body) == {"status": "ok", "now_ms": NOW}


def test_anything_else_is_404() -> None:
    for path in ("/index.html", "/static/page.js", "/api", "/x/"):
        answer = route(FakeSite(), path, "")
        assert answer.status == HTTPStatus.NOT_FOUND
        assert json.loads(answer.body) == {"error": "not found"}
