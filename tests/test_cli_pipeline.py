"""`streams create|update --pipeline` and where the CLI shows a stream's pipeline."""

from __future__ import annotations

import pytest
from rich.console import Console
from typer.testing import CliRunner

from streams.cli import app
from streams.commands.flags import ConfigFlags, validated
from streams.commands.views import config_rows, print_stream, streams_table
from streams.core import StreamConfig
from streams.errors import InvalidInput
from streams.readview import ReadView

NOW_MS = 1_795_946_400_000


def test_pipeline_sets_the_streams_pipeline_and_leaving_it_out_keeps_it() -> None:
    config = validated(ConfigFlags(start="now", pipeline="logs").merge({"stream_id": "a"}, NOW_MS))
    assert config["pipeline"] == "logs"
    assert ("--pipeline", "logs") in config_rows(config)
    assert validated(ConfigFlags(window="2m").merge(config, NOW_MS))["pipeline"] == "logs"
    plain = validated(ConfigFlags(start="now").merge({"stream_id": "a"}, NOW_MS))
    assert "pipeline" not in plain and ("--pipeline", "default") in config_rows(plain)


@pytest.mark.parametrize("name", ["a.b", "", "x" * 65, "é"])
def test_a_bad_pipeline_is_reported_naming_the_flag(name: str) -> None:
    flags = ConfigFlags(start="now", pipeline=name)
    with pytest.raises(InvalidInput) as caught:
        validated(flags.merge({"stream_id": "a"}, NOW_MS))
    assert caught.value.field == "--pipeline (pipeline)"


def test_a_bad_pipeline_exits_2_before_anything_talks_to_kafka() -> None:
    args = ["--bootstrap-servers", "127.0.0.1:1", "streams", "create", "x", "--start", "now"]
    result = CliRunner().invoke(app, [*args, "--pipeline", "a.b"])
    assert result.exit_code == 2, result.output
    assert "error: --pipeline (pipeline)" in result.stderr


def test_the_stream_table_and_show_name_the_pipeline() -> None:
    config = StreamConfig("s-1", NOW_MS - 3_600_000, pipeline="logs-export")
    view = ReadView("s-1", "live", None, NOW_MS - 60_000, stream_config=config,
                    pipeline=config.pipeline)  # fmt: skip
    out = Console(width=200, record=True)
    out.print(streams_table([view], NOW_MS))
    table = out.export_text()
    assert "pipeline" in table.splitlines()[1] and "logs-export" in table
    out = Console(width=200, record=True)
    print_stream(out, view, [], NOW_MS)
    shown = out.export_text()
    assert "pipeline" in shown and shown.count("logs-export") == 2  # the fact and --pipeline


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["tail", "commits", "--pipeline", "logs"], "tail tasks"),
        (["tail", "tasks", "--pipeline", "a.b"], "letters"),
    ],
)
def test_tail_pipeline_names_a_pipelines_tasks_topic_or_exits_2(
    args: list[str], reason: str
) -> None:
    result = CliRunner().invoke(app, ["--bootstrap-servers", "127.0.0.1:1", *args])
    assert result.exit_code == 2, result.output
    assert "error: --pipeline" in result.stderr and reason in result.stderr
