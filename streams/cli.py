"""The `tidemark` command line."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Annotated

import typer

from streams import buildinfo
from streams.cli_aliases import aliased
from streams.commands import cluster, pipeline_cmds, replay, source_cmds, stream_cmds, tail
from streams.commands.common import DEFAULT_CONNECT_TIMEOUT_S, Globals, Output, fail
from streams.dashboard import cli as dashboard_cli
from streams.errors import TidemarkError
from streams.worker import cli as worker_cli

app = typer.Typer(
    help="Tidemark: time-window pipelines on Kafka.",
    no_args_is_help=True,
    rich_markup_mode=None,  # help texts say "[env X, default]" literally
)
app.add_typer(stream_cmds.app, name="streams")
app.add_typer(pipeline_cmds.app, name="pipelines")
app.add_typer(source_cmds.app, name="sources")
app.add_typer(cluster.topics_app, name="topics")
app.command()(replay.replay)
app.command()(tail.tail)
app.command()(cluster.status)
app.command()(worker_cli.worker)
app.command()(dashboard_cli.dashboard)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"tidemark {buildinfo.version()}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    _version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the installed version and exit.",
        ),
    ] = False,
    output: Annotated[
        Output, typer.Option("--output", "-o", help="text for people, json for scripts")
    ] = Output.text,
    bootstrap_servers: Annotated[
        str | None,
        typer.Option(envvar="KAFKA_BOOTSTRAP_SERVERS", help="Kafka bootstrap servers"),
    ] = None,
    prefix: Annotated[
        str | None, typer.Option(envvar="TIDEMARK_TOPIC_PREFIX", help="topic prefix")
    ] = None,
    connect_timeout: Annotated[
        float,
        typer.Option(
            envvar="TIDEMARK_CONNECT_TIMEOUT_S",
            min=0.1,
            help="seconds to wait for the broker before giving up",
        ),
    ] = DEFAULT_CONNECT_TIMEOUT_S,
) -> None:
    """Tidemark: time-window pipelines on Kafka.

    Options before the command apply to it (and read the environment); every command that
    talks to Kafka also takes --bootstrap-servers and --prefix itself.
    """
    ctx.obj = Globals(output, bootstrap_servers, prefix, connect_timeout)
    given = {
        "KAFKA_BOOTSTRAP_SERVERS": ("bootstrap_servers", bootstrap_servers),
        "TIDEMARK_TOPIC_PREFIX": ("prefix", prefix),
    }
    if ctx.invoked_subcommand in ("coordinator", "worker", "dashboard"):
        # These read their settings from the environment: pass options given here on to them.
        for name, (param, value) in given.items():
            if value and _on_command_line(ctx, param):
                os.environ[name] = value


@app.command()
def coordinator(
    partitions: Annotated[
        int | None,
        typer.Option(help="Partitions of the co-partitioned topics [env TIDEMARK_PARTITIONS, 6]"),
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option(help="Where the RocksDB table lives [env TIDEMARK_DATA_DIR]")
    ] = None,
    flush_ms: Annotated[
        int | None,
        typer.Option(help="Commit coalescing interval, 0 = immediate [env TIDEMARK_FLUSH_MS, 200]"),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(help="Address of /health and /metrics [env TIDEMARK_WEB_HOST, 127.0.0.1]"),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, help="Port of /health and /metrics [env TIDEMARK_WEB_PORT, 6066]"
        ),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            help="confluent (exactly-once, Kafka transactions) or faust (at-least-once) "
            "[env TIDEMARK_ENGINE, confluent]"
        ),
    ] = None,
    instance_id: Annotated[
        str | None,
        typer.Option(
            help="This process's stable identity (its transactional.id) "
            "[env TIDEMARK_INSTANCE_ID, hostname + data folder]"
        ),
    ] = None,
    commit_interval_ms: Annotated[
        int | None,
        typer.Option(
            help="confluent engine: transaction commit interval under load "
            "[env TIDEMARK_COMMIT_INTERVAL_MS, 100]"
        ),
    ] = None,
    log_level: Annotated[str, typer.Option(help="crit, error, warn, info or debug")] = "info",
    web_port: Annotated[int | None, typer.Option(min=0, max=65535, hidden=True)] = None,
    loglevel: Annotated[str | None, typer.Option(hidden=True)] = None,
) -> None:
    """Run a coordinator in the foreground (SIGTERM or Ctrl-C stops it cleanly)."""
    from streams.coordinator.confluent.main import WEB_PORT
    from streams.coordinator.settings import CoordinatorSettings
    from streams.ports import PortUnavailable, check_can_listen

    port = aliased(port, web_port, "--web-port", "--port")
    log_level = aliased(log_level, loglevel, "--loglevel", "--log-level")
    settings = CoordinatorSettings.from_env()
    settings = dataclasses.replace(
        settings,
        engine=engine or settings.engine,
        instance_id=instance_id or settings.instance_id,
        commit_interval_ms=commit_interval_ms or settings.commit_interval_ms,
        partitions=settings.partitions if partitions is None else partitions,
        data_dir=data_dir or settings.data_dir,
        flush_ms=settings.flush_ms if flush_ms is None else flush_ms,
        web_host=host or settings.web_host,
        web_port=settings.web_port if port is None else port,
    )
    # Before any connection, so a busy port is one line naming it, not a traceback later.
    try:
        check_can_listen(settings.web_host, settings.web_port, *WEB_PORT)
    except PortUnavailable as exc:
        fail(str(exc))
        raise typer.Exit(1) from None
    if settings.engine == "faust":
        from streams.coordinator.faust.app import run

        run(settings, loglevel=log_level)
    else:
        from streams.coordinator.confluent.main import run_confluent

        run_confluent(settings, loglevel=log_level)


def _on_command_line(ctx: typer.Context, param: str) -> bool:
    source = ctx.get_parameter_source(param)
    return source is not None and source.name == "COMMANDLINE"


def main() -> None:
    try:
        # A fixed name: completion scripts and usage lines say `tidemark` however it was started.
        app(prog_name="tidemark")
    except TidemarkError as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise SystemExit(1) from None
