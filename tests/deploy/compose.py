"""docker-compose.yml brought up by a test: a project of its own on free ports, with the images
built here, and taken down with its volumes after."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from streams.dev.broker.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
PORTS = ("KAFKA_PORT", "COORDINATOR_PORT", "STATUS_PAGE_PORT", "PROMETHEUS_PORT", "GRAFANA_PORT")


class ComposeStack:
    def __init__(self, images_env: dict[str, str]) -> None:
        self.project = f"tidemark-test-{uuid.uuid4().hex[:8]}"
        self.ports = {name: free_port() for name in PORTS}
        self.env = {
            **os.environ,
            **images_env,
            **{name: str(port) for name, port in self.ports.items()},
        }

    def compose(self, *args: str, timeout_s: float = 300.0) -> str:
        cmd = ["docker-compose", "-f", str(ROOT / "docker-compose.yml"), "-p", self.project]
        done = subprocess.run([*cmd, *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)  # fmt: skip
        if done.returncode != 0:
            raise AssertionError(f"docker-compose {' '.join(args)}: exit {done.returncode}\n"
                                 f"{done.stdout}{done.stderr}")  # fmt: skip
        return done.stdout

    def up(self, services: Iterable[str]) -> None:
        self.compose("up", "-d", "--no-build", *services)

    def container(self, service: str) -> dict[str, Any]:
        """`docker inspect` of the service's container."""
        (cid,) = self.compose("ps", "-q", "-a", service).split()
        done = subprocess.run(["docker", "inspect", cid], capture_output=True, text=True,
                              check=True)  # fmt: skip
        found: dict[str, Any] = json.loads(done.stdout)[0]
        return found

    def status(self, service: str) -> str:
        """ "healthy"/"starting"/"unhealthy" for a service with a healthcheck, else its state
        ("running", or "exited 0")."""
        state = self.container(service)["State"]
        if state.get("Health"):
            return str(state["Health"]["Status"])
        if state["Status"] == "exited":
            return f"exited {state['ExitCode']}"
        return str(state["Status"])

    def wait(self, wanted: dict[str, str], timeout_s: float) -> None:
        """Wait until each service has its wanted status; fail naming those that do not."""
        deadline = time.monotonic() + timeout_s
        while True:
            now = {service: self.status(service) for service in wanted}
            if now == wanted:
                return
            broken = {
                service: status
                for service, status in now.items()
                if status != wanted[service] and status.startswith(("unhealthy", "exited"))
            }
            if broken:  # a healthcheck failed its retries, or a process ended
                raise AssertionError(f"{broken} while waiting for {wanted}")
            if time.monotonic() > deadline:
                raise AssertionError(f"after {timeout_s:g} s: {now}, wanted {wanted}")
            time.sleep(2)

    def run(self, *argv: str) -> str:
        """A one-off command in the tidemark image, on the stack's network."""
        return self.compose("run", "--rm", "--no-deps", "topics", *argv, timeout_s=120)

    def get_json(self, port_name: str, path: str) -> Any:
        url = f"http://127.0.0.1:{self.ports[port_name]}{path}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.load(answer)

    def logs(self) -> str:
        try:
            return self.compose("logs", "--no-color", "--tail", "60", timeout_s=60)
        except (AssertionError, subprocess.TimeoutExpired) as exc:
            return f"(no logs: {exc})"

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", "--timeout", "20", timeout_s=180)
