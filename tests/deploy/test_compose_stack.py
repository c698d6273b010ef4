"""docker-compose.yml, started: Kafka, the topics, a coordinator, two workers, the status page
and Prometheus (Grafana too when its image is on this machine) come up healthy, streams
registered through the CLI progress, and Prometheus scrapes every target.

The images are the local stand-ins (streams/dev/docker/images.py) where no registry is
reachable; the compose file is the users' own, switched by its variables. `make test-docker`;
the services' logs go to test-output/compose-stack.log.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from streams.dev.docker import LocalImages
from streams.dev.docker.images import exists
from tests.deploy.compose import ROOT, ComposeStack

pytestmark = [pytest.mark.docker]

LOGS = ROOT / "test-output" / "compose-stack.log"  # the services' last lines, each run
GRAFANA = "grafana/grafana:11.4.0"  # docker-compose.yml's default; used when at hand
WINDOW_S = 10


@pytest.fixture(scope="module")
def stack(local_images: LocalImages) -> Iterator[ComposeStack]:
    stack = ComposeStack(local_images.compose_env())
    services = ["kafka", "topics", "coordinator", "worker-1", "worker-2", "status-page",
                "prometheus", *(["grafana"] if exists(GRAFANA) else [])]  # fmt: skip
    try:
        stack.up(services)
        healthy = {name: "healthy" for name in services if name != "topics"}
        stack.wait({**healthy, "topics": "exited 0"}, timeout_s=420)
        yield stack
    finally:
        logs = stack.logs()
        LOGS.parent.mkdir(exist_ok=True)
        LOGS.write_text(logs)  # after the run, for a failed test
        print(logs)  # shown with a failed set-up
        stack.down()


def streams_by_id(stack: ComposeStack) -> dict[str, dict[str, Any]]:
    page = stack.get_json("STATUS_PAGE_PORT", "/api/streams?limit=100")
    return {row["stream_id"]: row for row in page["streams"]}


def test_streams_created_through_the_cli_progress_live(stack: ComposeStack) -> None:
    names = ["compose-a", "compose-b"]
    for name in names:
        stack.run("tidemark", "streams", "create", name, "--start", "now-1m",
                  "--window", f"{WINDOW_S}s", "--step", "1s")  # fmt: skip
    created_ms = int(time.time() * 1000)
    deadline = time.monotonic() + 180
    rows: dict[str, dict[str, Any]] = {}
    # Caught up on the minute before, then a live window ended after the creation delivered.
    while time.monotonic() < deadline:
        rows = streams_by_id(stack)
        if all(rows.get(n, {}).get("downstream_ms", 0) > created_ms for n in names):
            break
        time.sleep(2)
    else:
        raise AssertionError(f"streams not past {created_ms} within 180 s: {rows}")
    assert {rows[n]["state"] for n in names} == {"live"}, rows


def test_prometheus_scrapes_every_target(stack: ComposeStack) -> None:
    wanted = {
        "tidemark-coordinator": {"coordinator:6066"},
        "tidemark-worker": {"worker-1:9100", "worker-2:9100"},
        "tidemark-status-page": {"status-page:8080"},
    }
    deadline = time.monotonic() + 90
    found: dict[str, dict[str, str]] = {}
    while time.monotonic() < deadline:
        targets = stack.get_json("PROMETHEUS_PORT", "/api/v1/targets?state=active")
        found = {}
        for target in targets["data"]["activeTargets"]:
            job = target["labels"]["job"]
            found.setdefault(job, {})[target["labels"]["instance"]] = target["health"]
        if all(set(found.get(job, {}).values()) == {"up"} for job in wanted):
            break
        time.sleep(2)
    assert {job: set(instances) for job, instances in found.items()} == wanted
    assert all(set(instances.values()) == {"up"} for instances in found.values()), found
    # Each process's series arrive: its build info, one per target.
    answer = stack.get_json("PROMETHEUS_PORT", "/api/v1/query?query=tidemark_build_info")
    instances = {series["metric"]["instance"] for series in answer["data"]["result"]}
    assert instances == set().union(*wanted.values())
