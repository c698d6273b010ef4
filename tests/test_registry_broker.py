"""The pipeline registry on a real broker (issue 28, item 2): a worker announces its pipeline at
start, `streams create` refuses params its schema refuses (naming the field) and accepts good
ones, `pipelines list` shows the live worker, and after a clean stop it is no longer live."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from streams.cli import app
from streams.kafka.admin import create_topics
from streams.kafka.settings import KafkaSettings
from streams.topics import Topics

pytestmark = pytest.mark.broker
EXAMPLE = "streams.examples.jsonl_pipeline:JsonlPipeline"


def tidemark(kafka: KafkaSettings, prefix: str, *args: str) -> Result:
    env = {"KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "TIDEMARK_TOPIC_PREFIX": prefix,
           "COLUMNS": "250"}  # fmt: skip
    return CliRunner().invoke(app, list(args), env=env)


def listed(kafka: KafkaSettings, prefix: str) -> dict[str, Any]:
    result = tidemark(kafka, prefix, "pipelines", "list", "--output", "json")
    assert result.exit_code == 0, result.output
    return {doc["pipeline"]: doc for doc in json.loads(result.stdout)}


def wait_for(check: Any, what: str, timeout_s: float = 40.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what} not within {timeout_s} s"
        time.sleep(0.5)
    return found


def test_a_workers_announcement_checks_params_and_goes_at_a_clean_stop(
    kafka: KafkaSettings, unique: str, tmp_path: Path
) -> None:
    prefix = f"registry-{unique}"
    create_topics(kafka, Topics(prefix).specs(partitions=1, replication=1))
    worker_id = f"w-{unique}"
    cmd = [sys.executable, "-m", "streams.worker", "--pipeline", EXAMPLE, "--route", "files",
           "--prefix", prefix, "--instance-id", worker_id, "--grace-s", "1"]  # fmt: skip
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    with open(tmp_path / "worker.log", "ab") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        files = wait_for(
            lambda: listed(kafka, prefix).get("files", {}).get("live_workers"), "announcement"
        )
        assert [(w["worker"], w["handler"]) for w in files] == [(worker_id, EXAMPLE)]

        create = ["streams", "create", "s1", "--start", "now", "--pipeline", "files"]
        bad = tidemark(kafka, prefix, *create, "--param", "pth=/tmp/x")
        assert bad.exit_code == 2, bad.output
        assert "error: params.path: is required" in bad.stderr
        assert "Traceback" not in bad.output
        good = tidemark(kafka, prefix, *create, "--param", f"path={tmp_path / 'out.jsonl'}")
        assert good.exit_code == 0, good.output
        assert "warning" not in good.stderr

        doc = listed(kafka, prefix)["files"]
        assert doc["params_schema"] is True and doc["tasks_topic"] == f"{prefix}.tasks.files"
        assert [w["worker"] for w in doc["live_workers"]] == [worker_id]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(30) == 0, (tmp_path / "worker.log").read_text()
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            raise
    gone = listed(kafka, prefix).get("files", {"live_workers": []})
    assert gone["live_workers"] == []  # the tombstone: not live, not even stale
    # Withdrawn, the pipeline is unknown again: params go unchecked, and the CLI says so.
    after = tidemark(kafka, prefix, "streams", "create", "s2", "--start", "now", "--pipeline",
                     "files", "--param", "pth=/tmp/x")  # fmt: skip
    assert after.exit_code == 0, after.output
    assert "no worker has announced pipeline 'files'" in after.stderr
