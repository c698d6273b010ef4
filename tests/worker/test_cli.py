"""The worker command line: options, config validation, exit codes for bad input."""

from __future__ import annotations

import socket

import pytest

from streams.errors import InvalidInput
from streams.worker.cli import main, option_value, parse_options
from streams.worker.config import (
    WorkerConfig,
    session_timeout_from_env,
    topic_prefix_from_env,
)


def test_option_values_that_read_as_numbers_become_numbers() -> None:
    assert option_value("200") == 200
    assert option_value("-3") == -3
    assert option_value("0.25") == 0.25
    assert option_value("1e3") == 1000.0
    assert option_value("/tmp/outage") == "/tmp/outage"
    assert option_value("nan") == "nan"
    assert option_value("") == ""


def test_options_are_key_value_pairs() -> None:
    assert parse_options(["latency_ms=5", "outage_file=/tmp/a=b"]) == {
        "latency_ms": 5,
        "outage_file": "/tmp/a=b",
    }
    with pytest.raises(InvalidInput, match="key=value"):
        parse_options(["latency_ms"])


def test_names_default_from_the_prefix_and_pipeline() -> None:
    config = WorkerConfig("metrics", topic_prefix="prod")

    assert (config.tasks_topic, config.results_topic) == ("prod.tasks", "prod.results")
    assert config.group == "prod-workers-metrics"
    assert WorkerConfig("metrics", group_id="g").group == "g"
    assert topic_prefix_from_env({}) == "tidemark"
    assert topic_prefix_from_env({"TIDEMARK_TOPIC_PREFIX": "x"}) == "x"
    assert session_timeout_from_env({}) == 10_000
    assert session_timeout_from_env({"TIDEMARK_SESSION_TIMEOUT_MS": "6000"}) == 6_000
    with pytest.raises(InvalidInput, match="TIDEMARK_SESSION_TIMEOUT_MS"):
        session_timeout_from_env({"TIDEMARK_SESSION_TIMEOUT_MS": "soon"})


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"buffer": -1}, "buffer"),
        ({"grace_s": -1.0}, "grace_s"),
        ({"topic_prefix": "a b"}, "topic_prefix"),
        ({"group_id": ""}, "group_id"),
        ({"poll_interval_s": 0}, "poll_interval_s"),
        ({"session_timeout_ms": 0}, "session_timeout_ms"),
    ],
)
def test_bad_settings_name_their_field(fields: dict, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        WorkerConfig("synthetic", **fields)
    assert caught.value.field == field


def test_bad_input_exits_2_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--pipeline", "synthetic", "--option", "latency=1"]) == 2
    assert "unknown option" in capsys.readouterr().err
    assert main(["--pipeline", "synthetic", "--concurrency", "0"]) == 2
    assert main(["--pipeline", "nope"]) == 2
    assert "unknown pipeline 'nope'" in capsys.readouterr().err


def test_a_metrics_port_in_use_exits_2_before_connecting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["--pipeline", "synthetic", "--port", str(port)]

        assert main([*argv, "--bootstrap-servers", "127.0.0.1:1"]) == 2

    err = capsys.readouterr().err
    assert f"error: cannot listen on 127.0.0.1:{port} for the worker's /metrics" in err
    assert "choose another port with --port" in err
    assert "Traceback" not in err


def test_a_pipeline_of_ones_own_is_a_valid_name() -> None:
    config = WorkerConfig("examples.jsonl_pipeline:JsonlPipeline")
    assert config.group == "tidemark-workers-examples.jsonl_pipeline:JsonlPipeline"
    with pytest.raises(InvalidInput) as caught:
        WorkerConfig("no spaces:allowed")
    assert caught.value.field == "pipeline"


def test_a_worker_serves_the_default_pipeline_unless_routed_to_another() -> None:
    """The default route keeps the topic and the group of a worker older than pipelines, so
    that an upgrade changes nothing; a named route has a topic and a group of its own."""
    plain = WorkerConfig("synthetic", topic_prefix="prod")
    assert (plain.route, plain.tasks_topic, plain.group) == (
        "default", "prod.tasks", "prod-workers-synthetic"
    )  # fmt: skip
    routed = WorkerConfig("synthetic", topic_prefix="prod", route="logs")
    assert (routed.tasks_topic, routed.group) == ("prod.tasks.logs", "prod-workers-logs")
    assert WorkerConfig("windowlog:WindowLog", route="logs").group == "tidemark-workers-logs"
    assert WorkerConfig("synthetic", route="logs", group_id="g").group == "g"
    for bad in ("", "a.b", "x y"):
        with pytest.raises(InvalidInput) as caught:
            WorkerConfig("synthetic", route=bad)
        assert caught.value.field == "route"


def test_the_route_flag_reaches_the_config_and_a_bad_one_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[WorkerConfig] = []
    monkeypatch.setattr(
        "streams.worker.cli.run_worker", lambda config, **kw: seen.append(config) or 0
    )
    assert main(["--pipeline", "synthetic", "--route", "logs"]) == 0
    assert main(["--pipeline", "synthetic"]) == 0
    assert [c.route for c in seen] == ["logs", "default"]
    assert main(["--pipeline", "synthetic", "--route", "a.b"]) == 2
    assert "route" in capsys.readouterr().err
