"""The Grafana dashboard, the Prometheus scrape config and the docker-compose stack, checked
without Docker: they parse, every query names a series the services export, every service runs
a real `tidemark` command, and the scrape targets are the ports the services listen on.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from prometheus_client import CollectorRegistry

from streams.buildinfo import BuildInfoCollector
from streams.cli import app as cli
from streams.coordinator.health import SourceHealth
from streams.coordinator.processor import Processor
from streams.coordinator.settings import CoordinatorSettings
from streams.coordinator.telemetry.lag import ConsumerLagCollector
from streams.core import OutagePolicy
from streams.dashboard.cli import parse_args as dashboard_args
from streams.dev.broker.versions import DEFAULT_KAFKA_VERSION
from streams.topics import Topics
from streams.worker.cli import parse_args as worker_args
from streams.worker.metrics import WorkerMetrics
from tests.coordinator.fakes import InMemoryStore, RecordingEmitter, delivery

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "tidemark.json"

# The series each kind of family puts in the exposition (prometheus_client's text format).
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
}
# Words of PromQL that are not series names (functions are recognised by their parenthesis).
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan"}  # fmt: skip


def exported_series() -> set[str]:
    """Every series name a coordinator (with the outage guard and admission, as both engines
    run it) and a worker export, from registries built in-process."""
    processor = Processor(
        Topics(),
        6,
        InMemoryStore(),
        RecordingEmitter(),
        delivery=delivery(False),
        health=SourceHealth(OutagePolicy(), "c1"),
        source_limits=dict,
    )
    coordinator = processor.metrics.registry
    coordinator.register(ConsumerLagCollector(lambda: []))  # as both engines register them
    coordinator.register(BuildInfoCollector(engine="confluent"))
    worker = CollectorRegistry()
    WorkerMetrics(worker)
    return {
        family.name + suffix
        for registry in (coordinator, worker)
        for family in registry.collect()
        for suffix in SUFFIXES[family.type]
    }


def series_in(expr: str) -> set[str]:
    """The series names a PromQL expression selects."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values and strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges such as [$__rate_interval]
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = re.findall(r"(?<![\w$.])([a-zA-Z_:][\w:]*)\b(?!\s*\()", expr)
    return {name for name in names if name.lower() not in KEYWORDS}


def panels(nodes: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for node in nodes:
        yield node
        yield from panels(node.get("panels", []))


def queries() -> list[tuple[str, str]]:
    """(panel title, expression) of every target of the dashboard."""
    doc = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in panels(doc["panels"]) for t in p.get("targets", [])]


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def compose() -> dict[str, Any]:
    """docker-compose.yml as compose reads it with none of its variables set (each
    `${NAME:-default}` is its default)."""
    text = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", (ROOT / "docker-compose.yml").read_text())
    doc: dict[str, Any] = yaml.safe_load(text)
    return doc


def test_every_variable_of_the_compose_file_has_a_default() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    assert re.findall(r"\$\{([A-Z_]+)\}", text) == []  # no variable a user must set
    assert "${TIDEMARK_IMAGE:-tidemark:local}" in text


# -- the dashboard ------------------------------------------------------------------------------


def test_series_names_are_read_from_promql_expressions() -> None:
    expr = ('histogram_quantile(0.99, sum by (le, pipeline) (rate(a_bucket{job="x", le!="1"}'
            '[$__rate_interval]))) / ignoring(job) b_total offset 5m + on(group) c')  # fmt: skip
    assert series_in(expr) == {"a_bucket", "b_total", "c"}
    assert series_in("topk(20, max by (stream_id) (top_seconds))") == {"top_seconds"}


def test_the_dashboard_parses_and_its_panels_fit_the_grid() -> None:
    doc = json.loads(DASHBOARD.read_text())
    assert doc["uid"] == "tidemark" and doc["title"]
    ids = [p["id"] for p in panels(doc["panels"])]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    for panel in panels(doc["panels"]):
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["targets"], panel["title"]
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    (variable,) = doc["templating"]["list"]
    assert (variable["name"], variable["query"]) == ("datasource", "prometheus")


def test_every_query_names_only_series_the_services_export() -> None:
    exported = exported_series()
    for title, expr in queries():
        named = series_in(expr)
        assert named, f"{title}: {expr} names no series"
        assert named <= exported, f"{title}: {sorted(named - exported)} are not exported"


def test_the_dashboard_shows_what_an_operator_needs() -> None:
    used = set().union(*(series_in(expr) for _, expr in queries()))
    assert {
        "tidemark_consumer_lag",
        "tidemark_progress_lag_seconds_bucket",
        "tidemark_progress_lag_top_seconds",
        "tidemark_streams_behind",
        "tidemark_requeues_total",
        "tidemark_bypasses_total",
        "tidemark_timeouts_total",
        "tidemark_dispatch_delay_seconds_bucket",
        "tidemark_ack_to_commit_seconds_bucket",
        "tidemark_rejected_total",
        "tidemark_worker_tasks_total",
        "tidemark_worker_task_duration_seconds_bucket",
        "tidemark_sources_in_outage",
        "tidemark_streams_held",
        "tidemark_outage_hold_seconds",
    } <= used


def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (make system-deps)")
    rules = [
        {"record": f"dashboard:query_{i}", "expr": expr.replace("$__rate_interval", "1m")}
        for i, (_, expr) in enumerate(queries())
    ]
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    check = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def test_grafana_provisions_the_prometheus_datasource_and_the_dashboards() -> None:
    provisioning = DEPLOY / "grafana" / "provisioning"
    (source,) = load(provisioning / "datasources" / "prometheus.yml")["datasources"]
    assert (source["type"], source["url"], source["isDefault"]) == (
        "prometheus",
        "http://prometheus:9090",
        True,
    )
    (provider,) = load(provisioning / "dashboards" / "tidemark.yml")["providers"]
    grafana = compose()["services"]["grafana"]
    mounts = dict(volume.rsplit(":", 2)[:2] for volume in grafana["volumes"])
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    assert mounts["./deploy/grafana/dashboards"] == provider["options"]["path"]
    assert grafana["environment"]["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert grafana["environment"]["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"


# -- Prometheus and docker-compose ---------------------------------------------------------


def tidemark_command(argv: list[str]) -> tuple[list[str], list[str]]:
    """Parse `argv` as the CLI would: (the command path, the arguments given to the command,
    which its own parser took)."""
    assert argv[0] == "tidemark", argv
    command: Any = typer.main.get_command(cli)
    ctx = command.make_context("tidemark", argv[1:])
    path, rest = [], []
    while hasattr(command, "resolve_command"):  # a group: descend into the named command
        args = [*getattr(ctx, "_protected_args", []), *ctx.args]
        name, command, rest = command.resolve_command(ctx, args)
        path.append(name)
        ctx = command.make_context(name, list(rest), parent=ctx)
    assert ctx.args == [], argv  # nothing left over
    return path, list(rest)


def services_running(*path: str) -> dict[str, list[str]]:
    """Services whose command is `tidemark <path...>`: name -> the arguments after the path."""
    found = {}
    for name, service in compose()["services"].items():
        command = service.get("command")
        if isinstance(command, list) and command[:1] == ["tidemark"]:
            parsed, rest = tidemark_command(command)
            if parsed == list(path):
                found[name] = rest
    return found


def test_every_service_runs_a_real_tidemark_command() -> None:
    services = compose()["services"]
    commands = {
        name: s["command"] for name, s in services.items() if s.get("image") == "tidemark:local"
    }
    assert set(commands) == {"topics", "coordinator", "worker-1", "worker-2", "status-page"}
    for name, argv in commands.items():
        path, rest = tidemark_command(argv)
        if path == ["worker"]:  # the worker has a parser of its own
            args = worker_args(rest)
            assert (args.pipeline, args.host) == ("synthetic", "0.0.0.0"), name
        elif path == ["dashboard"]:  # and so has the status page
            page = dashboard_args(rest)
            assert (page.host, page.port) == ("0.0.0.0", 8080), name
        else:
            assert rest == [], name
        assert services[name]["environment"]["KAFKA_BOOTSTRAP_SERVERS"] == "kafka:19092"
    assert services["topics"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert services["coordinator"]["environment"]["TIDEMARK_WEB_HOST"] == "0.0.0.0"


def test_the_kafka_service_is_the_single_node_broker() -> None:
    kafka = compose()["services"]["kafka"]
    assert kafka["image"] == f"apache/kafka:{DEFAULT_KAFKA_VERSION}"  # the one the tests run
    assert kafka["ports"] == ["127.0.0.1:9092:9092"]
    assert kafka["environment"]["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"


def test_the_image_installs_tidemark_with_the_pinned_versions() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE=python:3\.11-slim$", dockerfile, re.M)
    assert re.search(r"^FROM \$\{BASE\}$", dockerfile, re.M)
    assert "pip install -c constraints.txt -r /tmp/requirements.txt" in dockerfile


def test_prometheus_scrapes_the_coordinator_and_worker_ports() -> None:
    config = load(DEPLOY / "prometheus.yml")
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    targets = {
        name: {t for static in job["static_configs"] for t in static["targets"]}
        for name, job in jobs.items()
    }
    assert all(job.get("metrics_path", "/metrics") == "/metrics" for job in jobs.values())

    services = compose()["services"]
    coordinators = services_running("coordinator")
    port = services["coordinator"]["environment"]["TIDEMARK_WEB_PORT"]
    assert port == str(CoordinatorSettings().web_port) == "6066"
    assert targets["tidemark-coordinator"] == {f"{name}:{port}" for name in coordinators}
    workers = {name: worker_args(rest).port
               for name, rest in services_running("worker").items()}  # fmt: skip
    assert targets["tidemark-worker"] == {f"{name}:{p}" for name, p in workers.items()}
    assert len(workers) == 2
    ((page, page_argv),) = services_running("dashboard").items()
    assert targets["tidemark-status-page"] == {f"{page}:{dashboard_args(page_argv).port}"}
    for name in (*coordinators, *workers, page):  # each process says whether it is healthy
        probe = " ".join(services[name]["healthcheck"]["test"])
        assert "/health" in probe, name
    assert services["coordinator"]["healthcheck"]["test"][-1].count(f":{port}/health") == 1

    prometheus = services["prometheus"]
    assert "./deploy/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prometheus["volumes"]
    promtool = shutil.which("promtool")
    if promtool:
        check = subprocess.run([promtool, "check", "config", str(DEPLOY / "prometheus.yml")],
                               capture_output=True, text=True, timeout=60)  # fmt: skip
        assert check.returncode == 0, check.stdout + check.stderr


def test_the_dashboard_shows_each_pipeline() -> None:
    used = set().union(*(series_in(expr) for _, expr in queries()))
    assert {
        "tidemark_pipeline_tasks_dispatched_total",
        "tidemark_pipeline_results_total",
    } <= used
    exprs = [expr for _, expr in queries() if "tidemark_consumer_lag" in expr]
    assert any("tasks" in expr and "topic" in expr for expr in exprs)  # each tasks topic's lag
