"""The Prometheus rules (deploy/prometheus/rules.yml): promtool accepts them and passes their unit
tests (tests.yml), every alert has a firing and a quiet case there, its labels and annotations,
and a section of docs/runbook.md at its runbook_url; every series they read is one the
coordinator's or the worker's registry exports, built in-process as the engines build them.

promtool comes with Debian's prometheus package (scripts/install-system-deps.sh, `make
system-deps`); without it these tests skip, except under CI=true, where they fail.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.prometheus import binaries
from tests.test_dashboards import exported_series, series_in

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
RULES = DEPLOY / "prometheus" / "rules.yml"
TESTS = DEPLOY / "prometheus" / "tests.yml"
RUNBOOK = ROOT / "docs" / "runbook.md"
SEVERITIES = ("critical", "warning")
# Series Prometheus makes itself, not the processes.
BUILTIN = {"up"}


def promtool() -> str:
    try:
        return binaries()[1]
    except RuntimeError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"promtool is required under CI: {exc}")
        pytest.skip(str(exc))


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def alerts() -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for rule in rules() if "alert" in rule}


def rule_tests() -> Iterator[dict[str, Any]]:
    for case in yaml.safe_load(TESTS.read_text())["tests"]:
        yield from case.get("alert_rule_test", [])


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def runbook_anchors() -> dict[str, str]:
    """Anchor -> heading of every section of the runbook."""
    headings = re.findall(r"^#{1,6} (.+)$", RUNBOOK.read_text(), flags=re.MULTILINE)
    return {slug(heading): heading for heading in headings}


def test_promtool_accepts_the_rules() -> None:
    check = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_rules_pass_their_promtool_unit_tests() -> None:
    run = subprocess.run([promtool(), "test", "rules", str(TESTS)], capture_output=True,
                         text=True, timeout=120, cwd=TESTS.parent)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in rule_tests():
        (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    assert set(alerts()) == firing == quiet


def test_every_alert_has_a_severity_a_summary_a_description_and_its_runbook_section() -> None:
    anchors = runbook_anchors()
    assert alerts()
    for name, rule in alerts().items():
        assert rule["labels"]["severity"] in SEVERITIES, name
        annotations = rule["annotations"]
        assert annotations["summary"] and annotations["description"], name
        path, _, anchor = annotations["runbook_url"].partition("#")
        assert path == "docs/runbook.md", name
        assert anchors.get(anchor) == name, f"{name}: no runbook section #{anchor}"


def test_every_runbook_alert_section_is_an_alert() -> None:
    sections = {h for h in runbook_anchors().values() if re.fullmatch(r"Tidemark\w+", h)}
    assert sections == set(alerts())


def test_every_series_the_rules_read_is_exported() -> None:
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    read = set().union(*(series_in(rule["expr"]) for rule in rules()))
    assert read - recorded - BUILTIN <= exported_series()
    assert {"tidemark_streams_late", "tidemark_partitions_owned", "tidemark_consumer_lag",
            "tidemark_outage_max_hold_seconds", "tidemark_bypasses_total"} <= read  # fmt: skip


def test_prometheus_loads_the_rules_the_compose_stack_mounts() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    assert config["rule_files"] == ["prometheus/rules.yml"]
    assert (DEPLOY / config["rule_files"][0]) == RULES
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    volumes = compose["services"]["prometheus"]["volumes"]
    assert "./deploy/prometheus:/etc/prometheus/prometheus:ro" in volumes
    assert "./deploy/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in volumes
