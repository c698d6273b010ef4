"""The status page's HTTP server in-process, over a fake read model: no broker, no browser."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streams.dashboard.cli import main, parse_args
from streams.dashboard.server import DashboardServer
from tests.dashboard.fakes import FakeBypass, FakeReadModel, FakeStream

NOW = 1_800_000_000_000
HOSTILE = "<script>alert('x')</script>&\"quoted\""


class Clock:
    """A settable wall clock in epoch milliseconds."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def model() -> FakeReadModel:
    return FakeReadModel(
        views=[
            FakeStream("slow", downstream_ms=NOW - 90_000, state_name="catching up"),
            FakeStream(HOSTILE, downstream_ms=NOW - 2_000, last_error={"kind": HOSTILE}),
        ],
        bypass_views=[FakeBypass("slow", NOW - 600_000, NOW - 540_000, bypassed_ms=NOW - 1)],
    )


@pytest.fixture
def clock() -> Clock:
    return Clock(NOW)


@pytest.fixture
def server(model: FakeReadModel, clock: Clock) -> Iterator[DashboardServer]:
    # A long interval: the first refresh runs at start, the tests trigger any later one.
    dashboard = DashboardServer(model=model, port=0, refresh_interval_s=60, clock=clock)
    with dashboard:
        assert model.refreshed.wait(5), "the refresher never ran"
        yield dashboard
    assert model.closed


@pytest.fixture(scope="module")
def shared() -> Iterator[DashboardServer]:
    """One server for the many read-only 404/405 cases (stopping one takes ~0.2 s)."""
    with DashboardServer(model=FakeReadModel(), port=0, refresh_interval_s=60) as dashboard:
        yield dashboard


def request(
    server: DashboardServer, method: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    where = urlsplit(server.url)
    conn = http.client.HTTPConnection(where.hostname or "", where.port, timeout=5)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def get_json(server: DashboardServer, path: str) -> tuple[int, Any]:
    status, headers, body = request(server, "GET", path)
    assert headers["Content-Type"] == "application/json"
    return status, json.loads(body)


def test_binds_to_loopback_by_default(server: DashboardServer) -> None:
    assert server.url.startswith("http://127.0.0.1:")
    assert parse_args([]).host == "127.0.0.1"
    assert parse_args([]).port == 8080


def test_api_state_shape(server: DashboardServer, model: FakeReadModel) -> None:
    status, doc = get_json(server, "/api/state")
    assert status == 200
    assert set(doc) == {
        "now_ms",
        "refreshed_ms",
        "refresh_error",
        "caught_up",
        "total",
        "counts",
        "streams",
        "bypasses",
        "outages",
        "pipelines",
    }
    assert doc["outages"] == []
    assert doc["pipelines"] == []  # no registry reader over a model given
    assert doc["caught_up"] is True
    assert doc["total"] == 2
    assert doc["now_ms"] == NOW
    assert doc["refreshed_ms"] == NOW
    assert doc["counts"] == {
        "live": 1, "catching up": 1, "retrying": 0, "paused": 0, "finished": 0
    }  # fmt: skip
    assert [(s["stream_id"], s["lag_ms"]) for s in doc["streams"]] == [
        ("slow", 90_000),
        (HOSTILE, 2_000),
    ]
    assert doc["streams"][1]["last_error"] == {"kind": HOSTILE, "message": ""}
    (bypass,) = doc["bypasses"]
    assert bypass["replay_command"] == (
        f"tidemark replay slow --from {NOW - 600_000} --to {NOW - 540_000}"
    )
    assert model.limits == [50]


def test_lag_is_computed_at_request_time(server: DashboardServer, clock: Clock) -> None:
    clock.now_ms += 7_000
    _, doc = get_json(server, "/api/state")
    assert doc["now_ms"] == NOW + 7_000
    assert doc["refreshed_ms"] == NOW
    assert doc["streams"][0]["lag_ms"] == 97_000


def test_the_page_is_static_html_with_a_strict_policy(server: DashboardServer) -> None:
    status, headers, body = request(server, "GET", "/")
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    policy = headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy
    assert "connect-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Cache-Control"] == "no-store"
    html = body.decode()
    assert 'fetch("/api/state"' in html
    # No data is rendered into the page server-side: user text only arrives as JSON.
    assert "slow" not in html
    assert "<script>alert" not in html


def test_user_text_is_escaped_in_json(server: DashboardServer) -> None:
    _, headers, body = request(server, "GET", "/api/state")
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert json.loads(body)["streams"][1]["stream_id"] == HOSTILE
    assert b'\\"quoted\\"' in body  # JSON-escaped, and never served as HTML


@pytest.mark.parametrize("path", ["/index.html", "/api", "/api/state/x", "/api/streams/x", "/x/"])
def test_any_other_path_is_404(shared: DashboardServer, path: str) -> None:
    status, _, body = request(shared, "GET", path)
    assert status == 404
    assert json.loads(body) == {"error": "not found"}


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "BREW"])
@pytest.mark.parametrize("path", ["/", "/api/state", "/api/streams", "/healthz", "/nowhere"])
def test_any_other_method_is_405(shared: DashboardServer, method: str, path: str) -> None:
    status, headers, _ = request(shared, method, path)
    assert status == 405
    assert headers["Allow"] == "GET"


def test_query_strings_are_ignored(server: DashboardServer) -> None:
    status, doc = get_json(server, "/api/state?delete=everything")
    assert status == 200
    assert len(doc["streams"]) == 2


def test_another_host_name_is_refused_on_loopback(server: DashboardServer) -> None:
    status, _, _ = request(server, "GET", "/api/state", {"Host": "attacker.example:8080"})
    assert status == 403
    for host in ("localhost:8080", "127.0.0.1", "[::1]:80"):
        assert request(server, "GET", "/healthz", {"Host": host})[0] == 200


def test_healthz(model: FakeReadModel, clock: Clock) -> None:
    dashboard = DashboardServer(model=model, port=0, refresh_interval_s=60, clock=clock)
    assert dashboard.health(NOW) == (503, {"status": "starting", "refreshed_ms": None})
    with dashboard:
        assert model.refreshed.wait(5)
        assert get_json(dashboard, "/healthz") == (200, {"status": "ok", "refreshed_ms": NOW})
        clock.now_ms += 11_000
        assert get_json(dashboard, "/healthz") == (503, {"status": "stale", "refreshed_ms": NOW})


def test_a_failed_refresh_keeps_the_last_data_and_says_why(
    server: DashboardServer, model: FakeReadModel, clock: Clock
) -> None:
    model.fail_with = RuntimeError("broker unreachable")
    clock.now_ms += 1_000
    server.refresh_once()
    _, doc = get_json(server, "/api/state")
    assert doc["refresh_error"] == "RuntimeError: broker unreachable"
    assert doc["refreshed_ms"] == NOW
    assert len(doc["streams"]) == 2

    model.fail_with = None
    server.refresh_once()
    _, doc = get_json(server, "/api/state")
    assert doc["refresh_error"] is None
    assert doc["refreshed_ms"] == NOW + 1_000


def test_the_refresher_runs_every_interval(model: FakeReadModel) -> None:
    with DashboardServer(model=model, port=0, refresh_interval_s=0.05):
        deadline_ok = model.refreshed.wait(5)
        for _ in range(100):
            if model.refreshes >= 3:
                break
            model.refreshed.clear()
            model.refreshed.wait(1)
    assert deadline_ok and model.refreshes >= 3
    assert model.closed


def test_main_reports_a_busy_port(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["--port", str(port), "--bootstrap-servers", "127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port} for the status page" in err
    assert "choose another port with --port" in err


def test_main_rejects_a_bad_port(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--port", "70000"]) == 2
    err = capsys.readouterr().err
    assert "Invalid value for '--port'" in err and "65535" in err


def test_stop_ends_the_threads_of_connections_that_never_send_a_request() -> None:
    """A browser opens spare connections it may never use: stop() must not leave their request
    threads (blocked reading a request line) behind, nor wait long for them."""
    before = set(threading.enumerate())
    dashboard = DashboardServer(model=FakeReadModel(), port=0, refresh_interval_s=60).start()
    try:
        address = urlsplit(dashboard.url)
        idle = socket.create_connection((address.hostname, address.port))
        time.sleep(0.3)  # the server accepts it and starts a thread that waits for a request
    finally:
        started = time.monotonic()
        dashboard.stop()
        took = time.monotonic() - started
    try:
        left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        assert left == [], f"threads left behind: {left}"
        assert took < 3, f"stop() took {took:.1f} s"
    finally:
        idle.close()


@pytest.fixture
def fleet(clock: Clock) -> Iterator[tuple[DashboardServer, FakeReadModel]]:
    """The server over 250 streams, s000 lagging least; every tenth one retrying."""
    views = [
        FakeStream(
            f"s{i:03d}",
            downstream_ms=NOW - i * 1000,
            state_name="retrying" if i % 10 == 9 else "live",
            attempt=i % 4,
        )
        for i in range(250)
    ]
    model = FakeReadModel(views=views)
    with DashboardServer(model=model, port=0, refresh_interval_s=60, clock=clock) as dashboard:
        assert model.refreshed.wait(5)
        yield dashboard, model


def test_api_streams_pages_sorts_and_searches_on_the_server(
    fleet: tuple[DashboardServer, FakeReadModel],
) -> None:
    server, _ = fleet
    status, doc = get_json(server, "/api/streams?limit=2")
    assert status == 200
    assert (doc["total"], doc["matching"], doc["offset"], doc["limit"]) == (250, 250, 0, 2)
    assert [s["stream_id"] for s in doc["streams"]] == ["s249", "s248"]  # largest lag first
    assert doc["counts"]["retrying"] == 25 and doc["counts"]["live"] == 225  # every stream
    _, doc = get_json(server, "/api/streams?offset=248&limit=50")
    assert [s["stream_id"] for s in doc["streams"]] == ["s001", "s000"]
    _, doc = get_json(server, "/api/streams?sort=stream_id&limit=3&offset=10")
    assert [s["stream_id"] for s in doc["streams"]] == ["s010", "s011", "s012"]
    _, doc = get_json(server, "/api/streams?sort=attempt&order=desc&limit=2")
    assert [(s["stream_id"], s["attempt"]) for s in doc["streams"]] == [("s247", 3), ("s243", 3)]
    _, doc = get_json(server, "/api/streams?sort=state&order=asc&limit=2")
    assert [(s["stream_id"], s["state"]) for s in doc["streams"]] == [
        ("s009", "retrying"),
        ("s019", "retrying"),
    ]
    _, doc = get_json(server, "/api/streams?q=s12&sort=lag_ms&order=asc")
    assert doc["matching"] == 10
    assert [s["stream_id"] for s in doc["streams"]][:3] == ["s120", "s121", "s122"]
    assert doc["counts"]["retrying"] == 25  # the counts stay over every stream


def test_api_state_carries_only_the_largest_lags(
    fleet: tuple[DashboardServer, FakeReadModel],
) -> None:
    server, _ = fleet
    _, doc = get_json(server, "/api/state")
    assert doc["total"] == 250
    assert len(doc["streams"]) == 100
    assert doc["streams"][0]["stream_id"] == "s249"
    assert sum(doc["counts"].values()) == 250


def test_api_streams_follows_each_refresh(
    fleet: tuple[DashboardServer, FakeReadModel], clock: Clock
) -> None:
    server, model = fleet
    del model.views[100:]
    model.views[0].downstream_ms = NOW - 10_000_000
    model.views.append(FakeStream("new-one", downstream_ms=NOW))
    clock.now_ms += 1_000
    server.refresh_once()
    _, doc = get_json(server, "/api/streams?limit=1")
    assert doc["total"] == 101
    assert doc["streams"][0]["stream_id"] == "s000"
    _, doc = get_json(server, "/api/streams?q=new")
    assert [s["stream_id"] for s in doc["streams"]] == ["new-one"]
    _, doc = get_json(server, "/api/streams?q=s2")
    assert doc["matching"] == 0


@pytest.mark.parametrize(
    ("query", "parameter"),
    [("limit=100000", "limit"), ("sort=secret", "sort"), ("order=sideways", "order"), ("x=1", "x")],
)
def test_api_streams_refuses_bad_parameters_with_400(
    shared: DashboardServer, query: str, parameter: str
) -> None:
    status, doc = get_json(shared, f"/api/streams?{query}")
    assert status == 400
    assert doc["parameter"] == parameter
    assert doc["error"].startswith(f"bad parameter {parameter}: ")


def test_while_the_topics_are_still_being_read_refreshes_follow_at_once() -> None:
    model = FakeReadModel(views=[FakeStream("a")], caught_up=False)
    with DashboardServer(model=model, port=0, refresh_interval_s=60) as dashboard:
        deadline = time.monotonic() + 5
        while model.refreshes < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert model.refreshes >= 3  # not one a minute
        model.caught_up = True
        _, doc = get_json(dashboard, "/api/streams")
        assert doc["total"] == 1
        time.sleep(0.2)
        settled = model.refreshes
        time.sleep(0.3)
        assert model.refreshes == settled  # caught up: back to one per interval


def _samples(server: DashboardServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, headers, body = request(server, "GET", "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def test_metrics_say_whether_the_page_can_be_trusted_and_how_it_is_used(
    server: DashboardServer, model: FakeReadModel, clock: Clock
) -> None:
    """The page's own /metrics: its build, the age of its data, whether refreshes fail, what it
    shows, and its answers by route and status (the timeline as one route, the rest "other")."""
    get_json(server, "/api/state")
    request(server, "GET", "/api/streams/slow/timeline")
    request(server, "GET", "/no/such/page")
    clock.now_ms += 4_000
    seen = _samples(server)
    assert seen[("tidemark_status_page_refresh_age_seconds", ())] == 4.0
    assert seen[("tidemark_status_page_refresh_failing", ())] == 0
    assert seen[("tidemark_status_page_caught_up", ())] == 1
    assert seen[("tidemark_status_page_streams", ())] == 2
    assert seen[("tidemark_status_page_sources_in_outage", ())] == 0
    requests = "tidemark_status_page_requests_total"
    assert seen[(requests, (("code", "200"), ("route", "/api/state")))] == 1
    assert seen[(requests, (("code", "404"), ("route", "other")))] == 1
    assert any(name == requests and dict(labels)["route"] == "timeline" for name, labels in seen)
    build = [labels for name, labels in seen if name == "tidemark_build_info"]
    assert build and dict(build[0])["component"] == "status_page"

    model.fail_with = RuntimeError("broker unreachable")
    server.refresh_once()
    assert _samples(server)[("tidemark_status_page_refresh_failing", ())] == 1
