"""`tidemark pipelines list`, and the registry check of `streams create|update` (streams.registry).

Both read the compacted `{prefix}.pipelines` topic, where every live worker announces what it
serves. A cluster older than the registry has no such topic: then nothing is checked, and the
command says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import typer
from rich.table import Table

from streams.clock import now_ms
from streams.commands.common import (
    READ_TIMEOUT_S,
    BootstrapOpt,
    CliEnv,
    OutputOpt,
    PrefixOpt,
    console,
    friendly_errors,
    print_json,
)
from streams.core.config import DEFAULT_PIPELINE
from streams.errors import BrokerUnavailable
from streams.kafka.admin import partition_counts
from streams.kafka.registry import pipeline_lags
from streams.readmodel import ReadModel
from streams.registry import PipelineInfo, check_stream_params, pipeline_doc, pipelines

app = typer.Typer(help="The pipelines workers serve, from the registry.", no_args_is_help=True)


def read_registry(env: CliEnv, topics: tuple[str, ...] = ("pipelines",)) -> ReadModel | None:
    """A read model of `topics` with the registry, caught up; None (said on stderr) when the
    cluster has no registry topic."""
    if not partition_counts(env.settings, [env.topics.pipelines], env.connect_timeout_s):
        console(stderr=True).print(
            f"warning: {env.topics.pipelines} does not exist: no worker of this version has "
            "started, so no pipeline is known and params are not checked"
        )
        return None
    model = ReadModel(env.settings, env.topics.prefix, topics)
    try:
        model.read_all(READ_TIMEOUT_S)
    finally:
        model.close()
    return model


def check_registered_params(env: CliEnv, config: dict[str, Any]) -> None:
    """Check a stream's params against its pipeline's registered schema: InvalidInput naming
    the field if refused; a warning on stderr when nothing was checked or no worker is live."""
    model = read_registry(env)
    if model is None:
        return
    pipeline = config.get("pipeline", DEFAULT_PIPELINE)
    info = pipelines(model.pipeline_entries(), now_ms()).get(pipeline)
    check = check_stream_params(info, pipeline, config.get("params") or {})
    for warning in check.warnings:
        console(stderr=True).print(f"warning: {warning}")


@app.command("list")
@friendly_errors
def list_(
    ctx: typer.Context,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Every pipeline: its live workers, their versions, its consumer lag and its streams."""
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    env.connect(require=["streams"])
    model = read_registry(env, ("streams", "pipelines"))
    if model is None:
        model = ReadModel(env.settings, env.topics.prefix, ("streams",))
        try:
            model.read_all(READ_TIMEOUT_S)
        finally:
            model.close()
    now = now_ms()
    served = {view.stream_id: view.pipeline for view in model.streams()}
    found = pipelines(model.pipeline_entries(), now, served)
    lags = _lags(env, found.values())
    docs = [
        pipeline_doc(info, env.topics.tasks_for(name), lags.get(name), now)
        for name, info in found.items()
    ]
    if env.json:
        print_json(docs)
    elif docs:
        console().print(pipelines_table(docs))
    else:
        console().print(f"no pipelines on {env.topics.pipelines} or {env.topics.streams}")


def pipelines_table(docs: list[dict[str, Any]]) -> Table:
    """pipeline, live workers, versions, lag, streams: one row per pipeline."""
    table = Table(title=None, title_justify="left")
    for name, justify in (("pipeline", "left"), ("live workers", "right"), ("versions", "left"),
                          ("lag", "right"), ("streams", "right")):  # fmt: skip
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for doc in docs:
        table.add_row(
            doc["pipeline"],
            str(len(doc["live_workers"])),
            ", ".join(doc["versions"]) or "-",
            "?" if doc["lag"] is None else str(doc["lag"]),
            str(len(doc["streams"])),
        )
    return table


def _lags(env: CliEnv, infos: Iterable[PipelineInfo]) -> dict[str, int]:
    """Each pipeline's lag; left out, with a warning, when the cluster does not answer (the
    list is still worth showing)."""
    try:
        return pipeline_lags(env.settings, env.topics, infos, env.connect_timeout_s)
    except BrokerUnavailable as exc:
        console(stderr=True).print(f"warning: consumer lag unknown: {exc}")
        return {}


__all__ = ["PipelineInfo", "app", "check_registered_params", "list_", "read_registry"]
