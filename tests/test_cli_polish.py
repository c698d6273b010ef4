"""The CLI's finish, without a broker: --version, shell completion, and the errors that name
the flag or variable to change."""

from __future__ import annotations

import socket

from typer.testing import CliRunner

from streams import buildinfo
from streams.cli import app
from streams.dev.broker import free_port


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
        "address already in use; choose another port with --web-port or TIDEMARK_WEB_PORT, "
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
