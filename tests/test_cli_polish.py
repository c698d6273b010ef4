"""The CLI's finish, without a broker: --version, shell completion, and the errors that name
the flag or variable to change."""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from streams import buildinfo
from streams.cli import app
from streams.commands.flags import ConfigFlags, validated
from streams.commands.tail import humanized
from streams.commands.views import lag_text, streams_table, view_state_text
from streams.dev.broker import free_port
from streams.errors import InvalidInput, TidemarkError
from streams.readview import ReadView


def test_version_prints_the_installed_distributions_version() -> None:
    result = CliRunner().invoke(app, ["--version"])

    assert result.exit_code == 0, result.output
    assert result.stdout == f"tidemark {buildinfo.version()}\n"
    assert buildinfo.version() != buildinfo.UNKNOWN  # the test environment installs it


def test_shell_completion_is_offered_and_shown() -> None:
    help_text = CliRunner().invoke(app, ["--help"]).stdout
    assert "--install-completion" in help_text
    assert "--show-completion" in help_text

    result = CliRunner().invoke(
        app, ["--show-completion", "bash"], prog_name="tidemark", env={"SHELL": "/bin/bash"}
    )
    assert result.exit_code == 0, result.output
    assert "_TIDEMARK_COMPLETE=complete_bash" in result.stdout


def test_a_busy_coordinator_port_names_the_port_and_how_to_change_it() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {"TIDEMARK_WEB_PORT": str(port), "TIDEMARK_WEB_HOST": "127.0.0.1"}
        result = CliRunner().invoke(
            app, ["--bootstrap-servers", "127.0.0.1:1", "coordinator"], env=env
        )

    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr.splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port} for the coordinator's /health and /metrics: "
        "address already in use; choose another port with --port or TIDEMARK_WEB_PORT, "
        "or stop the process that holds it"
    ]


def test_an_unreachable_broker_is_one_line_naming_the_address_and_the_variable() -> None:
    down = f"127.0.0.1:{free_port()}"
    result = CliRunner().invoke(
        app, ["--bootstrap-servers", down, "--connect-timeout", "0.5", "streams", "list"]
    )

    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: no Kafka broker answered at {down} within 0.5 s (")
    assert line.endswith(
        "; check that Kafka runs there, or set KAFKA_BOOTSTRAP_SERVERS (or --bootstrap-servers) "
        "to its address"
    )
    assert "KafkaError{" not in line


# -- --end takes what --start takes ------------------------------------------------------------

NOW_MS = 1_764_410_437_123  # between steps of 15 s and of 1 m


def test_end_relative_to_now_is_truncated_to_the_step_as_start_is() -> None:
    config = validated(ConfigFlags(start="now+1m", end="now+1h").merge({"stream_id": "a"}, NOW_MS))

    assert config["start_ms"] == NOW_MS + 60_000  # kept; the coordinator truncates it
    assert config["end_ms"] == NOW_MS + 3_600_000 - (NOW_MS + 3_600_000) % 15_000


def test_end_is_truncated_to_the_step_given_or_the_streams_own() -> None:
    given = ConfigFlags(start="now", step="1m", window="1m", end="now+1m")
    assert validated(given.merge({"stream_id": "a"}, NOW_MS))["end_ms"] % 60_000 == 0

    base = validated(ConfigFlags(start="now", step="5m", window="5m").merge({"stream_id": "a"}, 0))
    updated = validated(ConfigFlags(end="now+1h").merge(base, NOW_MS))
    assert updated["end_ms"] == (NOW_MS + 3_600_000) // 300_000 * 300_000


def test_end_before_start_is_still_an_error_naming_end() -> None:
    with pytest.raises(InvalidInput) as caught:
        validated(ConfigFlags(start="now", end="now-1h").merge({"stream_id": "a"}, NOW_MS))
    assert caught.value.field == "--end (end_ms)"


def test_create_with_start_and_end_relative_to_now_passes_validation() -> None:
    down = f"127.0.0.1:{free_port()}"
    args = ["streams", "create", "x", "--start", "now+1m", "--end", "now+1m30s"]
    result = CliRunner().invoke(
        app, ["--bootstrap-servers", down, "--connect-timeout", "0.2", *args]
    )

    assert result.exit_code == 1, result.output  # it got as far as the broker
    assert "no Kafka broker answered" in result.stderr


# -- times and durations for people ------------------------------------------------------------


def test_tail_text_shows_times_as_iso_and_durations_as_durations() -> None:
    value = {
        "stream_id": "s",
        "start_ms": 1_795_946_400_000,
        "config": {"window_ms": 90_000, "retry": {"strategy": "fixed", "interval_ms": 60_000}},
        "windows": [{"end_ms": 1_795_946_460_500, "attempts": 3}],
        "note_ms": "text stays text",
    }

    assert humanized(value) == {
        "stream_id": "s",
        "start_ms": "2026-11-29T10:00:00Z",
        "config": {"window_ms": "1m30s", "retry": {"strategy": "fixed", "interval_ms": "1m"}},
        "windows": [{"end_ms": "2026-11-29T10:01:00.500Z", "attempts": 3}],
        "note_ms": "text stays text",
    }


def test_lag_in_tables_is_at_most_two_units_rounded() -> None:
    assert lag_text(10_872) == "11s"
    assert lag_text(250_400) == "4m10s"
    assert lag_text(None) == "-"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--window", "3651d", "--step", "1d"],
            "--window (window_ms): must be <= 3650d, got 3651d",
        ),
        (["--gc-grace", "4000d"], "--gc-grace (gc_grace_ms): must be <= 3650d, got 4000d"),
        (["--timeout", "0s"], "--timeout (task_timeout_ms): must be more than 0s, got 0s"),
    ],
)
def test_bounds_in_errors_are_durations_naming_the_flag(flags: list[str], message: str) -> None:
    args = ["streams", "create", "x", "--start", "now", *flags]
    result = CliRunner().invoke(app, ["--bootstrap-servers", "127.0.0.1:1", *args])

    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {message}\n"


# -- streams list: held shown as held, --state -------------------------------------------------


def test_a_held_window_shows_since_when_in_the_state_column() -> None:
    now = 1_795_946_400_000 + 3_600_000  # 2026-11-29T11:00:00Z
    held = ReadView("s", "retrying", None, now - 60_000, held_since_ms=now - 3_355_250)
    plain = ReadView("t", "retrying", None, now - 60_000)
    out = Console(width=250, record=True)

    out.print(streams_table([held, plain], now))

    lines = out.export_text().splitlines()
    assert "retrying, held since 10:04:04Z" in next(line for line in lines if " s " in line)
    assert "held" not in next(line for line in lines if " t " in line)
    old = ReadView("s", "retrying", None, None, held_since_ms=now - 2 * 86_400_000)
    assert "held since 2026-11-27T11:00:00Z" in view_state_text(old, now).plain


@pytest.mark.parametrize("state", ["sleeping", "held", ""])
def test_list_state_is_validated_naming_the_flag(state: str) -> None:
    args = ["--bootstrap-servers", "127.0.0.1:1", "streams", "list", "--state", state]
    result = CliRunner().invoke(app, args)

    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: --state: {state!r} is not a state; "
        "use one of live, catching up, retrying, paused, finished\n"
    )


@pytest.mark.parametrize("state", ["live", "catching up", "catching-up", "Retrying", "finished"])
def test_list_state_takes_every_state_of_the_core(state: str) -> None:
    args = ["--bootstrap-servers", "127.0.0.1:1", "--connect-timeout", "0.2", "streams", "list"]
    result = CliRunner().invoke(app, [*args, "--state", state])

    assert result.exit_code == 1, result.output  # valid: it got as far as the broker
    assert "no Kafka broker answered" in result.stderr


# -- one spelling of each flag; the old ones hidden, deprecated aliases -------------------------


def test_worker_dashboard_and_coordinator_share_their_flag_names() -> None:
    for command in ("worker", "dashboard", "coordinator"):
        shown = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).stdout
        for flag in ("--log-level", "--host", "--port"):
            assert flag in shown, (command, flag)
        for old in ("--loglevel", "--metrics-port", "--metrics-host", "--web-port"):
            assert old not in shown, (command, old)


def test_the_workers_old_flag_spellings_still_work_with_a_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from streams.worker.cli import main, parse_args

    old = ["--pipeline", "synthetic", "--metrics-host", "0.0.0.0", "--metrics-port", "9100"]
    args = parse_args([*old, "--loglevel", "DEBUG"])
    assert (args.host, args.port, args.log_level) == ("0.0.0.0", 9100, "DEBUG")
    new = parse_args(["--pipeline", "synthetic", "--host", "0.0.0.0", "--port", "9100"])
    assert (new.host, new.port, new.log_level) == ("0.0.0.0", 9100, "INFO")

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        argv = ["--pipeline", "synthetic", "--metrics-port", str(port)]
        assert main([*argv, "--bootstrap-servers", "127.0.0.1:1"]) == 2  # the port was read
    err = capsys.readouterr().err
    assert "warning: --metrics-port is deprecated; use --port" in err
    assert f"cannot listen on 127.0.0.1:{port}" in err


def test_the_coordinators_old_flag_spellings_still_work_with_a_warning() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        args = ["coordinator", "--web-port", str(port), "--loglevel", "warn"]
        result = CliRunner().invoke(app, args, env={"TIDEMARK_WEB_HOST": "127.0.0.1"})

    assert result.exit_code == 1
    assert "warning: --web-port is deprecated; use --port" in result.stderr
    assert "warning: --loglevel is deprecated; use --log-level" in result.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr  # the port was read


# -- a startup line and a stop line ------------------------------------------------------------


def test_the_worker_says_what_it_starts_and_that_it_stopped(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from streams.worker import cli as worker_cli

    monkeypatch.setattr(worker_cli, "run_worker", lambda *args, **kwargs: 0)
    caplog.set_level(logging.INFO, logger="streams.worker")
    argv = ["--pipeline", "synthetic", "--prefix", "p", "--port", "9100"]
    env = {"KAFKA_BOOTSTRAP_SERVERS": "kafka:9092"}
    monkeypatch.setattr(os, "environ", {**os.environ, **env})

    assert worker_cli.run(worker_cli.parse_args(argv)) == 0

    assert [r.getMessage() for r in caplog.records if r.name == "streams.worker"] == [
        f"tidemark worker {buildinfo.version()} starting: pipeline synthetic, route default, "
        "group p-workers-synthetic, topics p.*, Kafka kafka:9092, "
        "/metrics and /health http://127.0.0.1:9100/metrics",
        "tidemark worker stopped (exit code 0)",
    ]


def test_the_dashboard_says_what_it_serves_and_that_it_stopped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from streams.dashboard.cli import serve
    from streams.kafka.settings import KafkaSettings

    caplog.set_level(logging.INFO, logger="streams.dashboard.cli")
    stop = threading.Event()
    stop.set()
    serve(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "p", "127.0.0.1", 0, stop)

    lines = [r.getMessage() for r in caplog.records if r.name == "streams.dashboard.cli"]
    assert lines[0].startswith(
        f"tidemark dashboard {buildinfo.version()}: serving http://127.0.0.1:"
    )
    assert lines[0].endswith("(topics p.*, Kafka 127.0.0.1:1)")
    assert lines[-1] == "tidemark dashboard: stopped"


def test_the_coordinator_says_what_it_starts_and_that_it_stopped(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from streams.coordinator.confluent import main as confluent_main
    from streams.coordinator.settings import CoordinatorSettings

    def no_broker(*args: object) -> None:
        raise TidemarkError("no broker here")

    monkeypatch.setattr(confluent_main, "block_stop_signals", lambda: None)
    monkeypatch.setattr(confluent_main, "prepare_topics_waiting", no_broker)
    caplog.set_level(logging.INFO, logger="streams.coordinator")
    settings = CoordinatorSettings.from_env(
        {"KAFKA_BOOTSTRAP_SERVERS": "kafka:9092", "TIDEMARK_TOPIC_PREFIX": "p",
         "TIDEMARK_INSTANCE_ID": "c-0", "TIDEMARK_WEB_PORT": "6066"}
    )  # fmt: skip

    with pytest.raises(TidemarkError):
        confluent_main.run_confluent(settings)

    assert [r.getMessage() for r in caplog.records if r.name == "streams.coordinator"] == [
        f"tidemark coordinator {buildinfo.version()} starting: engine confluent, instance "
        f"{settings.instance}, topics p.*, Kafka kafka:9092, /health and /metrics "
        "http://127.0.0.1:6066",
        "tidemark coordinator stopped",
    ]


# -- a warning before a backlog ------------------------------------------------------------------


def test_a_backlog_over_the_bound_is_warned_of_with_its_size_and_duration() -> None:
    from streams.commands.backlog import backlog_warning

    def config(**flags: str) -> dict[str, Any]:
        merged = ConfigFlags(**flags).merge({"stream_id": "a"}, NOW_MS)  # type: ignore[arg-type]
        return validated(merged)

    month = config(start="now-30d", window="15s", step="15s")
    warning = backlog_warning({**month, "max_in_flight": 8}, NOW_MS)
    assert warning is not None
    assert warning.startswith("a backlog of 172,800 windows is due at once; at --max-in-flight 8")
    assert "21,600 rounds of tasks, about 6h if each takes 1 s" in warning
    # At the bound, with an end, or from now: no warning.
    assert backlog_warning(config(start="now-2500m", window="15s", step="15s"), NOW_MS) is None
    ended = config(start="now-30d", end="now-29d", window="1m", step="1m")
    assert backlog_warning(ended, NOW_MS) is None
    assert backlog_warning(config(start="now"), NOW_MS) is None


def test_create_warns_of_a_backlog_before_it_connects() -> None:
    args = ["streams", "create", "x", "--start", "now-30d", "--window", "15s", "--step", "15s"]
    result = CliRunner().invoke(
        app, ["--bootstrap-servers", "127.0.0.1:1", "--connect-timeout", "0.2", *args]
    )

    assert result.exit_code == 1
    warning, error = result.stderr.splitlines()
    assert warning.startswith("warning: a backlog of 172,80")  # now moves on: 172,800 or 1
    assert error.startswith("error: no Kafka broker answered")
