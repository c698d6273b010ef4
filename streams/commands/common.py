"""What every command shares: the connection options, output, errors and the broker check.

The connection options (`--bootstrap-servers`, `--prefix`, `--output`, `--connect-timeout`) are
accepted both before the command (`tidemark --output json streams list`), where they also read
the environment, and after it (`tidemark streams list --output json`), where they win.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from streams.errors import InvalidInput, TidemarkError
from streams.kafka.admin import partition_counts, wait_ready
from streams.kafka.settings import KafkaSettings
from streams.topics import Topics

DEFAULT_CONNECT_TIMEOUT_S = 6.0
# A command reads the topics to their end for as long as each READ_TIMEOUT_S brings records
# (ReadModel.read_all); it says so when a read stalled that long before the end.
READ_TIMEOUT_S = 20.0


class Output(StrEnum):
    text = "text"
    json = "json"


OutputOpt = Annotated[
    Output | None,
    typer.Option("--output", "-o", help="text for people, json for scripts (on stdout)"),
]
BootstrapOpt = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-servers", help="Kafka bootstrap servers [env KAFKA_BOOTSTRAP_SERVERS]"
    ),
]
PrefixOpt = Annotated[
    str | None, typer.Option("--prefix", help="topic prefix [env TIDEMARK_TOPIC_PREFIX]")
]


@dataclass(frozen=True)
class Globals:
    """The options given before the command (or by the environment)."""

    output: Output = Output.text
    bootstrap_servers: str | None = None
    prefix: str | None = None
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S


@dataclass(frozen=True)
class CliEnv:
    """One command's resolved settings: where Kafka is, which topics, how to print."""

    settings: KafkaSettings
    topics: Topics
    output: Output
    connect_timeout_s: float

    @classmethod
    def of(
        cls,
        ctx: typer.Context,
        output: Output | None = None,
        bootstrap_servers: str | None = None,
        prefix: str | None = None,
    ) -> CliEnv:
        root = ctx.find_root().obj
        given = root if isinstance(root, Globals) else Globals()
        settings = KafkaSettings.from_env()
        servers = bootstrap_servers or given.bootstrap_servers
        if servers:
            settings = replace(settings, bootstrap_servers=servers)
        prefix = prefix or given.prefix or os.environ.get("TIDEMARK_TOPIC_PREFIX") or "tidemark"
        return cls(settings, Topics(prefix), output or given.output, given.connect_timeout_s)

    @property
    def json(self) -> bool:
        return self.output is Output.json

    def connect(self, require: Iterable[str] = ()) -> int:
        """Fail within the connect timeout unless the broker answers and the topics exist.

        `require` holds short topic names ("control"); returns the broker count.
        """
        brokers = wait_ready(self.settings, self.connect_timeout_s)
        names = [f"{self.topics.prefix}.{name}" for name in require]
        if names:
            existing = partition_counts(self.settings, names, self.connect_timeout_s)
            missing = [n for n in names if n not in existing]
            if missing:
                raise TidemarkError(
                    f"topic {', '.join(missing)} does not exist at "
                    f"{self.settings.bootstrap_servers}; create the topics with "
                    f"`tidemark topics create --prefix {self.topics.prefix}`"
                )
        return brokers


def console(stderr: bool = False) -> Console:
    """A rich console on the current stdout (or stderr), so that test runners can capture it.

    Markup is off: stream ids and error messages are shown as they are, brackets and all.
    """
    return Console(stderr=stderr, highlight=False, markup=False)


def print_json(doc: Any) -> None:
    """One JSON document on stdout, then a newline."""
    sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")
    sys.stdout.flush()


def fail(message: str) -> None:
    typer.secho(f"error: {message}", fg="red", err=True)


P = ParamSpec("P")
R = TypeVar("R")


def friendly_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Report Tidemark's errors as one line on stderr: exit 2 for bad input, 1 for the rest."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except InvalidInput as exc:
            fail(str(exc))
            raise typer.Exit(2) from None
        except TidemarkError as exc:
            fail(str(exc))
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            fail("interrupted")
            raise typer.Exit(130) from None

    return wrapper
