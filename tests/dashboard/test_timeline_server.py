"""`GET /api/streams/<id>/timeline` on the status page's server, in-process over a fake read model
and a fake read of `commits`: no broker, no browser."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import quote

import pytest

from streams.core import CommittedWindow
from streams.dashboard.server import DashboardServer
from streams.dashboard.timeline import Recent
from tests.dashboard.fakes import FakeBypass, FakeReadModel, FakeStream
from tests.dashboard.test_server import HOSTILE, NOW, Clock, request

MIN = 60_000


@dataclass
class FakeCommits:
    """Each stream's committed windows; records who asked."""

    windows: dict[str, list[tuple[CommittedWindow, int]]] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)
    closed: bool = False

    def recent(self, stream_id: str) -> Recent:
        self.asked.append(stream_id)
        found = tuple(self.windows.get(stream_id, []))
        return Recent(found, 2, 0, 40, 40, True, 5000)

    def close(self) -> None:
        self.closed = True


def acked(start_ms: int) -> tuple[CommittedWindow, int]:
    return CommittedWindow(start_ms, start_ms + MIN, "ack", 1), start_ms + MIN + 100


@pytest.fixture
def commits() -> FakeCommits:
    return FakeCommits(
        {
            "orders": [acked(NOW - 3 * MIN), acked(NOW - 2 * MIN)],
            HOSTILE: [(CommittedWindow(NOW - 2 * MIN, NOW - MIN, "bypass", 3), NOW - 5)],
        }
    )


@pytest.fixture
def server(commits: FakeCommits) -> Iterator[DashboardServer]:
    config = {"window_ms": MIN, "end_ms": None}
    model = FakeReadModel(
        views=[
            FakeStream("orders", downstream_ms=NOW - MIN, window=(NOW - MIN, NOW), attempt=1,
                       config=config),
            FakeStream(HOSTILE, downstream_ms=NOW - MIN, window=(NOW - MIN, NOW), attempt=5,
                       last_error={"kind": "no_data", "message": HOSTILE}, config=config),
        ],
        bypass_views=[FakeBypass(HOSTILE, NOW - 2 * MIN, NOW - MIN, attempts=3,
                                 last_error={"kind": "no_data", "message": HOSTILE})],
    )  # fmt: skip
    dashboard = DashboardServer(
        model=model, port=0, refresh_interval_s=60, clock=Clock(NOW), commits=commits
    )
    with dashboard:
        assert model.refreshed.wait(5)
        yield dashboard
    assert commits.closed


def get(server: DashboardServer, path: str) -> tuple[int, dict[str, object]]:
    status, headers, body = request(server, "GET", path)
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Content-Type-Options"] == "nosniff"
    doc: dict[str, object] = json.loads(body)
    return status, doc


def timeline_path(stream_id: str) -> str:
    return f"/api/streams/{quote(stream_id, safe='')}/timeline"


def test_a_known_stream_gets_its_cells(server: DashboardServer, commits: FakeCommits) -> None:
    status, doc = get(server, timeline_path("orders"))
    assert status == 200
    assert doc["stream_id"] == "orders" and doc["now_ms"] == NOW
    assert [(c["outcome"], c["start_ms"]) for c in doc["cells"]] == [  # type: ignore[attr-defined]
        ("acked", NOW - 3 * MIN),
        ("acked", NOW - 2 * MIN),
        ("open", NOW - MIN),
    ]
    assert doc["history"] == {
        "partition": 2, "from_offset": 0, "to_offset": 40, "records_read": 40,
        "complete": True, "limit": 5000, "error": None,
    }  # fmt: skip
    assert commits.asked == ["orders"]


def test_a_hostile_id_and_message_come_back_as_json_data(server: DashboardServer) -> None:
    status, doc = get(server, timeline_path(HOSTILE))
    assert status == 200 and doc["stream_id"] == HOSTILE
    bypass, current = doc["cells"]  # type: ignore[misc]
    assert bypass["outcome"] == "bypassed" and bypass["attempts"] == 3
    assert bypass["last_error"] == {"kind": "no_data", "message": HOSTILE}
    assert current["outcome"] == "retrying" and current["attempts"] == 5


def test_an_unknown_stream_is_404_with_a_message(
    server: DashboardServer, commits: FakeCommits
) -> None:
    assert get(server, timeline_path("nope/x")) == (404, {"error": "unknown stream: nope/x"})
    assert commits.asked == []  # nothing read for it


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/api/streams//timeline", "must not be empty"),
        ("/api/streams/%FF%FE/timeline", "is not UTF-8 once percent-decoded"),
        (f"/api/streams/{'y' * 201}/timeline", "must be at most 200 characters"),
    ],
)
def test_a_bad_id_is_400_naming_the_field(server: DashboardServer, path: str, reason: str) -> None:
    assert get(server, path) == (400, {"error": f"stream_id: {reason}", "field": "stream_id"})


@pytest.mark.parametrize("method", ["POST", "DELETE", "HEAD"])
def test_only_get_is_allowed(server: DashboardServer, method: str) -> None:
    status, headers, _ = request(server, method, timeline_path("orders"))
    assert status == 405 and headers["Allow"] == "GET"


@pytest.mark.parametrize("path", ["/api/streams/orders", "/api/streams/orders/timelines"])
def test_near_misses_are_404(server: DashboardServer, path: str) -> None:
    assert get(server, path) == (404, {"error": "not found"})


def test_without_a_read_of_commits_the_view_and_listing_still_show() -> None:
    model = FakeReadModel(
        views=[FakeStream("s", downstream_ms=NOW, config={"window_ms": MIN})],
        bypass_views=[FakeBypass("s", NOW - MIN, NOW)],
    )
    # A ready model and no `commits` reader: the server reads no topic itself (as in tests).
    with DashboardServer(model=model, port=0, refresh_interval_s=60, clock=Clock(NOW)) as server:
        assert model.refreshed.wait(5)
        status, doc = get(server, timeline_path("s"))
    assert status == 200
    assert [c["outcome"] for c in doc["cells"]] == ["bypassed"]  # type: ignore[attr-defined]
