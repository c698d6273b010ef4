"""The CLI's finish, without a broker: --version, shell completion, and the errors that name
the flag or variable to change."""

from __future__ import annotations

import socket

from typer.testing import CliRunner

from streams import buildinfo
from streams.cli import app


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
