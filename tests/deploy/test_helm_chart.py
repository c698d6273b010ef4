"""The Helm chart, deploy/helm/tidemark: linted, rendered with the default values and with
deploy/helm/examples/production.yaml, the manifests validated offline against the Kubernetes
schemas (kubernetes-validate), its values schema seen rejecting bad values, and what it renders
(ports, probes, environment, arguments, grace periods) checked against what the processes read:
the settings objects, the argument parsers and the web endpoints themselves, so that renaming a
variable, a flag or a path in the code breaks a test here."""

from __future__ import annotations

import subprocess
import tomllib
import urllib.request
from collections.abc import Iterator, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.support.helm import ROOT, helm_binary
from tests.test_dashboards import exported_series

CHART = ROOT / "deploy" / "helm" / "tidemark"
PRODUCTION = ROOT / "deploy" / "helm" / "examples" / "production.yaml"
RELEASE = "tidemark"
NAMESPACE = "tidemark"
# The oldest Kubernetes the chart declares (Chart.yaml kubeVersion) and the newest that
# kubernetes-validate ships schemas for.
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")
# Custom resources: kubernetes-validate has no schema for them, so their shape is checked here
# (test_custom_resources_have_their_shape). Any other kind without a schema fails.
CUSTOM_KINDS = {
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
}
VALUE_FILES = {"default": [], "production": [PRODUCTION]}


def helm(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm_binary()), *map(str, args)], capture_output=True, text=True, timeout=120
    )


def render(*args: str | Path) -> list[dict[str, Any]]:
    done = helm("template", RELEASE, CHART, "--namespace", NAMESPACE, *args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def values_args(name: str) -> list[str | Path]:
    return [arg for path in VALUE_FILES[name] for arg in ("--values", path)]


def values_of(name: str) -> dict[str, Any]:
    """The values a render used: the chart's defaults, merged with the file's."""
    merged: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    for path in VALUE_FILES[name]:
        _merge(merged, yaml.safe_load(path.read_text()))
    return merged


def _merge(into: dict[str, Any], new: Mapping[str, Any]) -> None:
    for key, value in new.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


@pytest.fixture(scope="module", params=sorted(VALUE_FILES))
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    return request.param, render(*values_args(request.param))


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str, component: str) -> dict[str, Any]:
    found = [
        d
        for d in of_kind(docs, kind)
        if d["metadata"]["labels"].get("app.kubernetes.io/component") == component
    ]
    assert len(found) == 1, f"{len(found)} {kind} of {component}"
    return found[0]


def container(workload: dict[str, Any]) -> dict[str, Any]:
    (only,) = workload["spec"]["template"]["spec"]["containers"]
    return only


def port_named(c: dict[str, Any], name: str) -> int:
    (port,) = [p["containerPort"] for p in c["ports"] if p["name"] == name]
    return int(port)


class Reads(dict[str, str]):
    """An environment that records which variables were asked for."""

    def __init__(self, env: Mapping[str, str]) -> None:
        super().__init__(env)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)


def environment(c: dict[str, Any], pod_name: str) -> dict[str, str]:
    """The container's environment as the process would see it: the downward API's pod name,
    a placeholder for a Secret's key, a Secret's files mounted where the container mounts it."""
    env: dict[str, str] = {}
    for var in c["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        elif var["valueFrom"].get("fieldRef", {}).get("fieldPath") == "metadata.name":
            env[var["name"]] = pod_name
        else:
            ref = var["valueFrom"]["secretKeyRef"]
            env[var["name"]] = f"<{ref['name']}/{ref['key']}>"
    return env


# -- helm lint and template -------------------------------------------------------------------


@pytest.mark.parametrize("values", sorted(VALUE_FILES))
def test_helm_lint_passes(values: str) -> None:
    done = helm("lint", "--strict", CHART, *values_args(values))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


def test_app_version_is_the_package_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart["apiVersion"] == "v2"
    assert chart["appVersion"] == project["version"]


def test_renders_every_part(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    name, docs = rendered
    values = values_of(name)
    kinds = sorted({(d["kind"], d["metadata"]["name"]) for d in docs})
    pipelines = values["workers"]["pipelines"]
    assert len(of_kind(docs, "StatefulSet")) == 1, kinds
    assert len(of_kind(docs, "PodDisruptionBudget")) == 1, kinds
    assert len(of_kind(docs, "Deployment")) == len(pipelines) + 1, kinds  # + the status page
    components = {d["metadata"]["labels"].get("app.kubernetes.io/component") for d in docs}
    assert components == {"coordinator", "worker", "dashboard", None}, kinds  # None: the account
    scaled = [p for p in pipelines if p.get("autoscaling", {}).get("enabled")]
    assert len(of_kind(docs, "ScaledObject")) == (len(scaled) if values["keda"]["enabled"] else 0)
    monitors = of_kind(docs, "ServiceMonitor")
    monitored = 3 if values["dashboard"]["enabled"] else 2  # the status page's own /metrics
    assert len(monitors) == (monitored if values["serviceMonitor"]["enabled"] else 0)


def test_production_example_is_what_its_comment_says() -> None:
    values = values_of("production")
    assert values["coordinator"]["replicas"] == 3
    assert len(values["workers"]["pipelines"]) == 2
    assert values["keda"]["enabled"]
    assert all(p["autoscaling"]["enabled"] for p in values["workers"]["pipelines"])
    assert values["kafka"]["sasl"]["enabled"]


# -- the manifests against the Kubernetes schemas -----------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_manifests_validate_against_kubernetes_schemas(
    rendered: tuple[str, list[dict[str, Any]]], version: str
) -> None:
    _, docs = rendered
    checked = 0
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CUSTOM_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{doc['kind']} {doc['metadata']['name']}: {exc.message} at {exc.path}")
        checked += 1
    assert checked >= 7


def test_validation_catches_a_broken_manifest(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    """The validation above can fail: a misspelled field of a rendered StatefulSet does."""
    _, docs = rendered
    broken = yaml.safe_load(yaml.safe_dump(of_kind(docs, "StatefulSet")[0]))
    broken["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[-1], strict=True)


def test_custom_resources_have_their_shape() -> None:
    docs = render(*values_args("production"))
    kinds = {(d["apiVersion"], d["kind"]) for d in docs}
    assert kinds >= CUSTOM_KINDS  # every kind skipped above is checked here
    deployments = {d["metadata"]["name"]: d for d in of_kind(docs, "Deployment")}
    pipelines = {p["name"]: p for p in values_of("production")["workers"]["pipelines"]}
    scaled = of_kind(docs, "ScaledObject")
    assert len(scaled) == len(pipelines)
    for obj in scaled:
        spec = obj["spec"]
        target = deployments[spec["scaleTargetRef"]["name"]]
        assert spec["scaleTargetRef"]["kind"] == "Deployment"
        # KEDA owns the replica count: a Deployment that set it would fight the HPA at upgrades.
        assert "replicas" not in target["spec"]
        route = _worker_args(container(target)).route
        auto = pipelines[route]["autoscaling"]
        assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (
            auto["minReplicas"],
            auto["maxReplicas"],
        )
        assert spec["minReplicaCount"] <= spec["maxReplicaCount"]
        (trigger,) = spec["triggers"]
        assert trigger["type"] == "prometheus"
        meta = trigger["metadata"]
        assert set(meta) == {"serverAddress", "query", "threshold"}
        assert meta["query"] == f'sum(tidemark_pipeline_windows{{pipeline="{route}"}})'
        assert "tidemark_pipeline_windows" in exported_series()  # what the coordinators export
        assert int(meta["threshold"]) == auto["windowsPerReplica"]
        assert meta["serverAddress"].startswith("http")
    services = of_kind(docs, "Service")
    for monitor in of_kind(docs, "ServiceMonitor"):
        spec = monitor["spec"]
        wanted = spec["selector"]["matchLabels"]
        chosen = [s for s in services if wanted.items() <= s["metadata"]["labels"].items()]
        assert len(chosen) == 1, monitor["metadata"]["name"]
        ports = {p["name"] for p in chosen[0]["spec"]["ports"]}
        assert spec["endpoints"], monitor["metadata"]["name"]
        for endpoint in spec["endpoints"]:
            assert endpoint["port"] in ports
            assert endpoint["path"] == "/metrics"
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"


# -- the values schema and the chart's own checks ------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        (["--set", "coordinator.replicas=0"], "replicas"),
        (["--set", "coordinator.engine=streams"], "engine"),
        (["--set", "coordinator.replica=3"], "replica"),  # not a value: a typo
        (["--set", "coordinator.terminationGracePeriodSeconds=5"], "terminationGracePeriodSeconds"),
        (["--set", "kafka.groupProtocol=eager"], "groupProtocol"),
        (["--set", "topicPrefix=has space"], "topicPrefix"),
        (["--set", "workers.pipelines[0].name=no/slash"], "name"),
        (["--set", "workers.pipelines[0].options.latency_ms=200"], "latency_ms"),
        (["--set-string", "coordinator.extraEnv.TIDEMARK_WEB_PORT=80"], "TIDEMARK_WEB_PORT"),
    ],
)
def test_schema_rejects_a_bad_value_naming_it(setting: list[str], named: str) -> None:
    done = helm("template", RELEASE, CHART, *setting)
    assert done.returncode != 0, f"{setting} was accepted"
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr
    assert named in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        (["--set", "kafka.sasl.enabled=true"], "kafka.sasl.existingSecret"),
        (["--values", PRODUCTION, "--set", "keda.prometheusAddress="], "keda.prometheusAddress"),
        (["--values", "{same_names}"], "have the same object name"),
    ],
)
def test_chart_refuses_an_incomplete_setup(
    setting: list[str | Path], named: str, tmp_path: Path
) -> None:
    # Two pipelines whose names make the same Deployment name (a list is replaced whole by
    # --set, so a values file gives it).
    pipelines = values_of("default")["workers"]["pipelines"]
    same = [{**pipelines[0], "name": "logs_eu"}, {**pipelines[0], "name": "logs-eu"}]
    same_names = tmp_path / "same.yaml"
    same_names.write_text(yaml.safe_dump({"workers": {"pipelines": same}}))
    args = [str(same_names) if arg == "{same_names}" else arg for arg in setting]
    done = helm("template", RELEASE, CHART, *args)
    assert done.returncode != 0, f"{setting} was accepted"
    assert named in done.stderr, done.stderr


def test_every_value_is_in_the_schema() -> None:
    """The schema refuses a key it does not describe (so `helm lint` and `helm install` catch
    a misspelled value; test_schema_rejects_a_bad_value_naming_it shows one), and describes no
    value that values.yaml leaves out: values.yaml shows every setting, with its default."""
    import json

    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    paths = 0
    for path, node in _object_paths(schema, schema, ()):
        paths += 1
        if "properties" in node:
            # Refused, or typed (requests and limits take any resource name, as quantities).
            assert node.get("additionalProperties", True) is not True, f"{path} takes any key"
        if path and path[-1] in _NOT_DEFAULTED:
            continue
        assert _lookup(defaults, path) is not None or path[-1] in _NULLABLE, path
    assert paths > 100


def test_extra_env_cannot_set_what_the_chart_sets() -> None:
    """coordinator.extraEnv refuses exactly the TIDEMARK_* variables the chart sets itself
    (a second TIDEMARK_WEB_PORT would move the port away from the probes)."""
    import json

    schema = json.loads((CHART / "values.schema.json").read_text())
    extra = schema["properties"]["coordinator"]["properties"]["extraEnv"]
    refused = set(extra["propertyNames"]["not"]["enum"])
    docs = render("--set", "coordinator.replication=3", "--set", "coordinator.minInsyncReplicas=2")
    c = container(one(docs, "StatefulSet", "coordinator"))
    assert {v["name"] for v in c["env"] if v["name"].startswith("TIDEMARK_")} == refused


# Values that values.yaml leaves at null on purpose, and what is set as Kubernetes has it
# (resources: a CPU limit, say, is left out on purpose).
_NULLABLE = {"replication", "minInsyncReplicas", "concurrency"}
_NOT_DEFAULTED = {"global", "cpu", "limits"}


def _object_paths(
    schema: dict[str, Any], node: dict[str, Any], at: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    if "$ref" in node:
        node = schema["definitions"][node["$ref"].rsplit("/", 1)[1]]
    yield at, node
    if node.get("type") != "object" or "properties" not in node:
        return
    for key, sub in node["properties"].items():
        if key == "pipelines":  # a list: its first item is checked, nested
            yield (*at, key), sub
            yield from _object_paths(schema, sub["items"], (*at, key, "0"))
            continue
        yield from _object_paths(schema, sub, (*at, key))


def _lookup(values: Any, path: tuple[str, ...]) -> Any:
    node: Any = values
    for key in path:
        if isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        elif isinstance(node, dict) and key in node:
            node = node[key]
        else:
            return None
    return node


# -- what is rendered, against what the processes read --------------------------------------------


def test_coordinator_matches_its_settings(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    from streams.coordinator.confluent import engine as confluent_engine
    from streams.coordinator.faust import app as faust_app
    from streams.coordinator.settings import CoordinatorSettings

    name, docs = rendered
    values = values_of(name)
    sts = one(docs, "StatefulSet", "coordinator")
    c = container(sts)
    pod = f"{sts['metadata']['name']}-0"
    env = Reads(environment(c, pod))
    settings = CoordinatorSettings.from_env(env)

    assert set(env) <= env.read, f"set but never read: {sorted(set(env) - env.read)}"
    # The pod name is the instance id (the transactional.id's suffix): a restart fences.
    (instance,) = [v for v in c["env"] if v["name"] == "TIDEMARK_INSTANCE_ID"]
    assert instance["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert settings.instance == pod
    assert sts["spec"]["serviceName"]
    # The web port: served on the pod's address, the port the container and its probes name.
    assert settings.web_host == "0.0.0.0"
    assert settings.web_port == port_named(c, "web") == values["coordinator"]["webPort"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"] == {"path": "/health", "port": "web"}, probe
    assert _coordinator_answers(c["livenessProbe"]["httpGet"]["path"]) == HTTPStatus.OK
    assert settings.engine == values["coordinator"]["engine"]
    assert settings.partitions == values["coordinator"]["partitions"]
    assert settings.replication == values["coordinator"]["replication"]
    assert settings.min_insync_replicas == values["coordinator"]["minInsyncReplicas"]
    # RocksDB on the pod's own volume.
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    mounts = {m["name"]: Path(m["mountPath"]) for m in c["volumeMounts"]}
    assert settings.data_dir.is_relative_to(mounts[claim["metadata"]["name"]])
    # Kubernetes waits longer than either engine's clean stop before it kills.
    grace = sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > max(confluent_engine.STOP_DEADLINE_S, faust_app.STOP_DEADLINE_S)
    _check_kafka(settings.kafka, env, c, values)
    assert settings.topics.prefix == values["topicPrefix"]
    assert settings.session_timeout_ms == values["sessionTimeoutMs"]
    _check_cli(c, "coordinator")


def _coordinator_answers(path: str) -> int:
    """What the confluent engine's web endpoint answers at `path` (a real server)."""
    from prometheus_client import CollectorRegistry

    from streams.coordinator.confluent.web import HealthServer

    server = HealthServer(
        "127.0.0.1", 0, lambda: {"status": "waiting_for_brokers"}, CollectorRegistry()
    ).start()
    try:
        port = server._httpd.server_address[1]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
    finally:
        server.stop()


def test_coordinator_probe_check_can_fail() -> None:
    assert _coordinator_answers("/healthz") == HTTPStatus.NOT_FOUND


def test_workers_match_their_settings(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    from streams.kafka.settings import KafkaSettings
    from streams.pipelines import PIPELINES
    from streams.worker.cli import parse_options
    from streams.worker.config import (
        WorkerConfig,
        session_timeout_from_env,
        topic_prefix_from_env,
    )
    from streams.worker.runner import STOP_MARGIN_S

    name, docs = rendered
    values = values_of(name)
    pipelines = {p["name"]: p for p in values["workers"]["pipelines"]}
    workers = [
        d
        for d in of_kind(docs, "Deployment")
        if d["metadata"]["labels"]["app.kubernetes.io/component"] == "worker"
    ]
    assert len(workers) == len(pipelines)
    seen = set()
    for deployment in workers:
        c = container(deployment)
        args = _worker_args(c)
        pipeline = pipelines[args.route]
        seen.add(args.route)
        assert args.pipeline == pipeline["handler"]
        assert args.pipeline in PIPELINES or ":" in args.pipeline
        assert args.concurrency == pipeline.get("concurrency")
        assert parse_options(args.option, convert=str) == pipeline.get("options", {})
        assert args.host == "0.0.0.0"
        assert args.port == port_named(c, "metrics") == values["workers"]["metricsPort"]
        for probe in ("livenessProbe", "readinessProbe"):
            assert c[probe]["httpGet"] == {"path": "/health", "port": "metrics"}, probe
        assert _worker_answers(c["livenessProbe"]["httpGet"]["path"]) == "200 OK"
        env = Reads(environment(c, "worker"))
        kafka = KafkaSettings.from_env(env)
        config = WorkerConfig(
            pipeline=args.pipeline,
            route=args.route,
            topic_prefix=topic_prefix_from_env(env),
            session_timeout_ms=session_timeout_from_env(env),
        )
        assert set(env) <= env.read, f"set but never read: {sorted(set(env) - env.read)}"
        assert config.topic_prefix == values["topicPrefix"]
        assert config.session_timeout_ms == values["sessionTimeoutMs"]
        _check_kafka(kafka, env, c, values)
        grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert grace > args.grace_s + config.flush_timeout_s + STOP_MARGIN_S
        if not (values["keda"]["enabled"] and pipeline["autoscaling"]["enabled"]):
            assert deployment["spec"]["replicas"] == pipeline["replicas"]
    assert seen == set(pipelines)


def _worker_args(c: dict[str, Any]) -> Any:
    from streams.worker.cli import parse_args

    assert c["command"] == ["tidemark"]
    assert c["args"][0] == "worker"
    _check_cli(c, "worker")
    return parse_args(c["args"][1:])


def _worker_answers(path: str) -> str:
    """The status line the worker's /health and /metrics app answers at `path`."""
    from streams.kafka.reachability import BrokerWatch
    from streams.worker.runner import health_app

    status: list[str] = []

    def metrics(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [])
        return [b"metrics"]

    app = health_app(BrokerWatch(), metrics)
    body = b"".join(app({"PATH_INFO": path}, lambda s, h: status.append(s)))
    assert body.startswith(b"{"), f"{path} is not /health: {body[:40]!r}"
    return status[0]


def test_worker_probe_check_can_fail() -> None:
    with pytest.raises(AssertionError, match="is not /health"):
        _worker_answers("/healthz")


def test_status_page_matches_its_settings(
    rendered: tuple[str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from streams.dashboard import cli as dashboard_cli
    from streams.kafka.settings import KafkaSettings

    name, docs = rendered
    values = values_of(name)
    deployment = one(docs, "Deployment", "dashboard")
    c = container(deployment)
    assert c["command"] == ["tidemark"]
    assert c["args"][0] == "dashboard"
    _check_cli(c, "dashboard")
    env = Reads(environment(c, "dashboard"))
    monkeypatch.setattr(os, "environ", env)  # parse_args reads TIDEMARK_TOPIC_PREFIX there
    args = dashboard_cli.parse_args(c["args"][1:])
    kafka = KafkaSettings.from_env(env)
    assert set(env) <= env.read, f"set but never read: {sorted(set(env) - env.read)}"
    assert args.host == "0.0.0.0"
    assert args.port == port_named(c, "http") == values["dashboard"]["port"]
    assert args.prefix == values["topicPrefix"]
    _check_kafka(kafka, env, c, values)
    assert c["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["livenessProbe"]["tcpSocket"] == {"port": "http"}
    assert _status_page_answers("/healthz") == HTTPStatus.SERVICE_UNAVAILABLE  # not read yet
    assert _status_page_answers("/health") == HTTPStatus.NOT_FOUND
    (service,) = [
        s
        for s in of_kind(docs, "Service")
        if s["metadata"]["labels"]["app.kubernetes.io/component"] == "dashboard"
    ]
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == "http"
    assert port["port"] == values["dashboard"]["service"]["port"]


def _status_page_answers(path: str) -> int:
    """The status the status page's routes give `path` before its first read of the topics."""
    from streams.dashboard.routes import route

    class Site:
        @staticmethod
        def clock() -> int:
            return 1_000_000

        def health(self, now_ms: int) -> tuple[HTTPStatus, dict[str, Any]]:
            return HTTPStatus.SERVICE_UNAVAILABLE, {"status": "starting"}

        def snapshot(self) -> Any:
            raise AssertionError("not a health path")

        def timeline(self, path: str) -> Any:
            raise AssertionError("not a health path")

    return int(route(Site(), path, "").status)


def _check_kafka(
    kafka: Any, env: Mapping[str, str], c: dict[str, Any], values: dict[str, Any]
) -> None:
    """The process's KafkaSettings from the rendered environment, against the values; files
    named by the environment are inside a mounted Secret."""
    k = values["kafka"]
    assert kafka.bootstrap_servers == k["bootstrapServers"]
    assert kafka.group_protocol == k["groupProtocol"]
    protocol = ("SASL_" if k["sasl"]["enabled"] else "") + (
        "SSL" if k["tls"]["enabled"] else "PLAINTEXT"
    )
    assert kafka.security["security.protocol"] == protocol
    if k["sasl"]["enabled"]:
        assert kafka.security["sasl.mechanism"] == k["sasl"]["mechanism"]
        secret = k["sasl"]["existingSecret"]
        assert kafka.security["sasl.username"] == f"<{secret}/{k['sasl']['usernameKey']}>"
        assert kafka.security["sasl.password"] == f"<{secret}/{k['sasl']['passwordKey']}>"
    mounts = [Path(m["mountPath"]) for m in c["volumeMounts"]]
    for key in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location"):
        if key in kafka.security:
            assert any(Path(kafka.security[key]).parent == m for m in mounts), key
    if k["tls"]["enabled"] and k["tls"]["caSecret"]:
        assert "ssl.ca.location" in kafka.security


def _check_cli(c: dict[str, Any], command: str) -> None:
    """`tidemark <command> ...` as the container runs it parses with the CLI's own parser (an
    option renamed in the code fails here)."""
    import typer

    from streams.cli import app

    argv = [*c["command"], *c.get("args", [])][1:]
    assert argv[0] == command
    group: Any = typer.main.get_command(app)  # typer's own click, vendored (typer._click)
    ctx = group.make_context("tidemark", list(argv))
    sub = group.get_command(ctx, command)
    assert sub is not None, command
    sub.make_context(command, list(argv[1:]), parent=ctx)


# -- security and wiring of every pod --------------------------------------------------------------


def test_pods_are_non_root_read_only_with_requests(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    _, docs = rendered
    workloads = of_kind(docs, "StatefulSet") + of_kind(docs, "Deployment")
    for workload in workloads:
        what = workload["metadata"]["name"]
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, what
        assert pod["securityContext"]["runAsUser"] != 0, what
        assert pod["automountServiceAccountToken"] is False, what
        volumes = {v["name"]: v for v in pod["volumes"]}
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, what
            assert sc["allowPrivilegeEscalation"] is False, what
            assert sc["capabilities"]["drop"] == ["ALL"], what
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), what
            (tmp,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
            assert "emptyDir" in volumes[tmp["name"]], what


def test_selectors_find_their_pods(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    """Every Service, the PodDisruptionBudget and each workload select the pods meant."""
    _, docs = rendered
    workloads = of_kind(docs, "StatefulSet") + of_kind(docs, "Deployment")
    pods = {w["metadata"]["name"]: w["spec"]["template"]["metadata"]["labels"] for w in workloads}
    for workload in workloads:
        wanted = workload["spec"]["selector"]["matchLabels"]
        assert [n for n, labels in pods.items() if wanted.items() <= labels.items()] == [
            workload["metadata"]["name"]
        ]
    for service in of_kind(docs, "Service"):
        wanted = service["spec"]["selector"]
        component = service["metadata"]["labels"]["app.kubernetes.io/component"]
        chosen = [n for n, labels in pods.items() if wanted.items() <= labels.items()]
        assert chosen, service["metadata"]["name"]
        assert all(pods[n]["app.kubernetes.io/component"] == component for n in chosen)
    (pdb,) = of_kind(docs, "PodDisruptionBudget")
    wanted = pdb["spec"]["selector"]["matchLabels"]
    (sts,) = of_kind(docs, "StatefulSet")
    chosen = [n for n, labels in pods.items() if wanted.items() <= labels.items()]
    assert chosen == [sts["metadata"]["name"]]
    assert sts["spec"]["serviceName"] in {s["metadata"]["name"] for s in of_kind(docs, "Service")}


def test_notes_say_how_to_reach_the_status_page() -> None:
    done = helm("install", RELEASE, CHART, "--dry-run=client", "--namespace", NAMESPACE)
    assert done.returncode == 0, done.stderr
    assert "port-forward service/tidemark-dashboard 8080:8080" in done.stdout
    assert "curl -s http://127.0.0.1:6066/health" in done.stdout
