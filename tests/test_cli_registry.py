"""`streams create|update` check params against the registry, and `pipelines list` shows it:
in process, the CLI reading a registry built from real records (no broker)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field
from typer.testing import CliRunner

from streams.cli import app
from streams.commands import pipeline_cmds, stream_cmds
from streams.commands.common import CliEnv
from streams.kafka.settings import KafkaSettings
from streams.readmodel import ReadModel
from streams.wire.pipelines import encode_pipeline, pipeline_key
from streams.worker.config import WorkerConfig
from streams.worker.registry import Announcement


class LogParams(BaseModel, extra="forbid"):
    path: str
    batch: int = Field(default=10, ge=1)


class LogHandler:
    params_model = LogParams
    version = "2.0"


def registry(*workers: tuple[str, int]) -> ReadModel:
    """A read model fed the entries of workers of pipeline `logs` (id, published_ms)."""
    model = ReadModel(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "tm", ("pipelines",))
    for worker, published_ms in workers:
        config = WorkerConfig("mine:LogHandler", topic_prefix="tm", route="logs",
                              instance_id=worker)  # fmt: skip
        announcement = Announcement.of(config, LogHandler())
        entry = announcement.entry(published_ms)
        model.apply("pipelines", pipeline_key("logs", worker), encode_pipeline(entry))
    return model


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Runs `tidemark ...` with Kafka left out: no stream exists, sends are recorded, and the
    registry is what the test sets in `cli.registry`."""
    sent: list[bytes] = []

    class Cli:
        registry: ReadModel | None = None
        sent_values = sent

        def __call__(self, *args: str) -> Any:
            return CliRunner().invoke(app, ["--prefix", "tm", *args])

    runner = Cli()
    monkeypatch.setattr(CliEnv, "connect", lambda self, require=(): 1)
    monkeypatch.setattr(
        stream_cmds, "_read", lambda env, topics=None: ReadModel(env.settings, "tm", ("streams",))
    )
    monkeypatch.setattr(stream_cmds, "send", lambda settings, topic, key, value: sent.append(value))
    monkeypatch.setattr(stream_cmds, "ensure_tasks_topic", lambda *a, **k: False)
    monkeypatch.setattr(pipeline_cmds, "read_registry", lambda env, topics=(): runner.registry)
    monkeypatch.setattr(pipeline_cmds, "now_ms", lambda: 60_000)
    return runner


CREATE = ["streams", "create", "s1", "--start", "now", "--pipeline", "logs"]


def test_bad_params_are_refused_naming_the_field_without_a_traceback(cli: Any) -> None:
    cli.registry = registry(("w1", 59_000))
    result = cli(*CREATE, "--param", "batch=0", "--param", "path=/x")
    assert result.exit_code == 2, result.output
    assert "error: params.batch: must be at least 1" in result.stderr
    assert "Traceback" not in result.output
    missing = cli(*CREATE, "--param", "batch=3")
    assert missing.exit_code == 2 and "error: params.path: is required" in missing.stderr
    typo = cli(*CREATE, "--param", "path=/x", "--param", "bacth=3")
    assert typo.exit_code == 2 and "error: params.bacth: is not a param" in typo.stderr
    assert cli.sent_values == []  # nothing went to control


def test_good_params_are_sent_without_a_warning(cli: Any) -> None:
    cli.registry = registry(("w1", 59_000))
    result = cli(*CREATE, "--param", "path=/x", "--param", "batch=3")
    assert result.exit_code == 0, result.output
    assert "warning" not in result.stderr
    assert json.loads(cli.sent_values[0])["params"] == {"path": "/x", "batch": 3}


def test_no_live_worker_warns_but_creates(cli: Any) -> None:
    cli.registry = registry(("w1", 1_000))  # 59 s old: stale
    result = cli(*CREATE, "--param", "path=/x")
    assert result.exit_code == 0, result.output
    assert "warning: no live worker serves pipeline 'logs'" in result.stderr
    assert len(cli.sent_values) == 1


def test_an_unannounced_pipeline_creates_and_says_params_are_not_checked(cli: Any) -> None:
    cli.registry = registry()
    result = cli(*CREATE, "--param", "anything=1")
    assert result.exit_code == 0, result.output
    assert "no worker has announced pipeline 'logs'" in result.stderr
    assert "not checked" in result.stderr


def test_update_checks_the_merged_params(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    existing = cli(*CREATE, "--param", "path=/x")
    assert existing.exit_code == 0
    config = {k: v for k, v in json.loads(cli.sent_values[0]).items() if k != "type"}

    class Current:
        pass

    current = Current()
    current.config = config  # type: ignore[attr-defined]
    monkeypatch.setattr(stream_cmds, "_existing", lambda env, stream: current)
    cli.registry = registry(("w1", 59_000))
    result = cli("streams", "update", "s1", "--param", "batch=-1")
    assert result.exit_code == 2 and "error: params.batch:" in result.stderr
    fine = cli("streams", "update", "s1", "--param", "batch=5")
    assert fine.exit_code == 0, fine.output


def test_pipelines_list_shows_live_workers_versions_lag_and_streams(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = registry(("w1", 59_000), ("w0", 1_000))
    cli.registry = model
    monkeypatch.setattr(pipeline_cmds, "_lags", lambda env, infos: {"logs": 7})
    doc = json.loads(cli("pipelines", "list", "--output", "json").stdout)
    assert [d["pipeline"] for d in doc] == ["logs"]
    (logs,) = doc
    assert [w["worker"] for w in logs["live_workers"]] == ["w1"]  # w0 is stale
    assert logs["versions"] == ["2.0"] and logs["lag"] == 7
    assert logs["tasks_topic"] == "tm.tasks.logs" and logs["params_schema"] is True
    text = cli("pipelines", "list").stdout
    assert "logs" in text and "2.0" in text
