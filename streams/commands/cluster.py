"""`tidemark topics create` and `tidemark status`: the cluster itself, and a summary of it."""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from streams.clock import now_ms
from streams.commands.common import (
    READ_TIMEOUT_S,
    BootstrapOpt,
    CliEnv,
    OutputOpt,
    PrefixOpt,
    console,
    fail,
    friendly_errors,
    print_json,
)
from streams.commands.source_limits import sources_load_table
from streams.commands.views import (
    STATE_STYLES,
    by_lag,
    bypass_doc,
    print_bypasses,
    stream_doc,
    streams_table,
)
from streams.errors import BrokerUnavailable
from streams.kafka.admin import create_topics, partition_counts
from streams.readmodel import ReadModel

TOP_LAGGING = 10
RECENT_BYPASSES = 10

topics_app = typer.Typer(help="Kafka topics of Tidemark.", no_args_is_help=True)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw and raw.isdigit() else default


@topics_app.command("create")
@friendly_errors
def create_topics_command(
    ctx: typer.Context,
    partitions: Annotated[
        int | None,
        typer.Option(min=1, help="partitions per topic [env TIDEMARK_PARTITIONS, 6]"),
    ] = None,
    replication: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="replication factor [env TIDEMARK_REPLICATION; default: the cluster's "
            "default.replication.factor on 3 brokers or more, else 1]",
        ),
    ] = None,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Create every topic Tidemark uses (existing ones are kept as they are).

    control, results, ticks and the coordinator's changelog must share one partition count;
    bypassed and the changelog are compacted.
    """
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    count = partitions or _env_int("TIDEMARK_PARTITIONS", 6)
    specs = env.topics.specs(count, replication or _env_int("TIDEMARK_REPLICATION", 0) or None)
    env.connect()
    created = set(create_topics(env.settings, specs))
    counts = partition_counts(env.settings, [s.name for s in specs], env.connect_timeout_s)
    rows = [(s.name, counts.get(s.name, s.partitions), s.name in created) for s in specs]
    if env.json:
        print_json(
            {
                "created": [name for name, _, new in rows if new],
                "existing": [name for name, _, new in rows if not new],
                "partitions": {name: n for name, n, _ in rows},
            }
        )
        return
    table = Table()
    for column in ("topic", "partitions", ""):
        table.add_column(column)
    for name, n, new in rows:
        table.add_row(name, str(n), "created" if new else "already existed")
    console().print(table)
    mismatched = [name for name, n, new in rows if not new and n != count]
    if mismatched:
        console(stderr=True).print(
            f"note: {', '.join(mismatched)} already existed with another partition count "
            f"than {count}"
        )


@friendly_errors
def status(
    ctx: typer.Context,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Cluster summary: the broker, streams by state, the sources (health, limit, in flight,
    waiting, pacing), the most lagging streams, recent bypasses.

    Exit 1 when the broker cannot be reached.
    """
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    broker: dict[str, Any] = {"bootstrap_servers": env.settings.bootstrap_servers}
    try:
        broker |= {"reachable": True, "brokers": env.connect()}
    except BrokerUnavailable as exc:
        broker |= {"reachable": False, "error": str(exc)}
        if env.json:
            print_json({"broker": broker})
        else:
            where = f" at {env.settings.bootstrap_servers}"
            console().print(Text.assemble("broker: ", ("unreachable", "red"), where))
        fail(str(exc))
        raise typer.Exit(1) from None
    views_topic = env.topics.streams
    exists = views_topic in partition_counts(env.settings, [views_topic], env.connect_timeout_s)
    model = ReadModel(env.settings, env.topics.prefix)
    try:
        model.read_all(READ_TIMEOUT_S)
    finally:
        model.close()
    now = now_ms()
    from streams.dashboard.sources_reader import read_sources  # the status page's Sources view

    outages, sources = read_sources(env.settings, env.topics, now, READ_TIMEOUT_S)
    views = by_lag(model.streams(), now)
    counts = dict.fromkeys(STATE_STYLES, 0)
    for view in views:
        counts[view.state(now)] += 1
    lagging, bypasses = views[:TOP_LAGGING], model.bypasses(RECENT_BYPASSES)
    if env.json:
        print_json(
            {
                "broker": broker,
                "prefix": env.topics.prefix,
                "topics_exist": exists,
                "caught_up": model.caught_up,
                "streams": len(views),
                "states": counts,
                "lagging": [stream_doc(v, now, config=False) for v in lagging],
                "bypasses": [bypass_doc(b) for b in bypasses],
                "outages": [outage.to_json() for outage in outages],
                "sources": sources["sources"],
            }
        )
        return
    out = console()
    where = f" at {env.settings.bootstrap_servers} ({broker['brokers']} broker(s))"
    out.print(Text.assemble("broker: ", ("reachable", "green"), where))
    if not exists:
        out.print(
            f"no topics {env.topics.prefix}.* yet: create them with "
            f"`tidemark topics create --prefix {env.topics.prefix}`",
            style="yellow",
        )
    for outage in outages:  # what an operator must see first
        out.print(outage.line(now), style="bold red")
    by_state = ", ".join(f"{n} {state}" for state, n in counts.items())
    out.print(f"streams: {len(views)} ({by_state})")
    if not model.caught_up:
        out.print("the topics were not read to their end; this view may be behind", style="yellow")
    if sources["sources"]:
        out.print(sources_load_table(sources["sources"], now))
        if sources["omitted"]:
            out.print(f"and {sources['omitted']:,} more sources", style="dim")
    if lagging:
        out.print(streams_table(lagging, now, title=f"most lagging (top {TOP_LAGGING})"))
    if bypasses:
        print_bypasses(out, bypasses, "recent bypasses")
    else:
        out.print("no bypassed windows")
