"""The CLI's finish, without a broker: --version, shell completion, and the errors that name
the flag or variable to change."""

from __future__ import annotations

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
