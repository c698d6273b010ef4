"""The `tidemark` command line."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from streams.errors import TidemarkError

app = typer.Typer(
    help="Tidemark: time-window pipelines on Kafka.", no_args_is_help=True, add_completion=False
)


@app.callback()
def _root() -> None:
    """Tidemark: time-window pipelines on Kafka."""


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
    web_port: Annotated[
        int | None,
        typer.Option(help="Health endpoint port on 127.0.0.1 [env TIDEMARK_WEB_PORT, 6066]"),
    ] = None,
    loglevel: Annotated[str, typer.Option(help="crit, error, warn, info or debug")] = "info",
) -> None:
    """Run a coordinator in the foreground (SIGTERM or Ctrl-C stops it cleanly)."""
    from streams.coordinator.app import run
    from streams.coordinator.settings import CoordinatorSettings

    settings = CoordinatorSettings.from_env()
    settings = dataclasses.replace(
        settings,
        partitions=settings.partitions if partitions is None else partitions,
        data_dir=data_dir or settings.data_dir,
        flush_ms=settings.flush_ms if flush_ms is None else flush_ms,
        web_port=settings.web_port if web_port is None else web_port,
    )
    run(settings, loglevel=loglevel)


def main() -> None:
    try:
        app()
    except TidemarkError as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise SystemExit(1) from None
