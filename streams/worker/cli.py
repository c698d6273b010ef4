"""``python -m streams.worker``: run one worker process from the command line.

    tidemark worker --pipeline synthetic --concurrency 8 --option latency_ms=200
    python -m streams.worker --pipeline windowlog:WindowLog --route logs --port 9100

Kafka is found through the environment (``KAFKA_BOOTSTRAP_SERVERS`` and the ``KAFKA_*``
security variables of ``KafkaSettings.from_env``), or ``--bootstrap-servers``. Exit codes:
0 after a clean stop, 1 if the worker failed, 2 for bad arguments or pipeline options.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any

import typer

from streams import buildinfo
from streams.cli_aliases import aliased, run_as_program
from streams.errors import InvalidInput
from streams.kafka.settings import KafkaSettings
from streams.pipelines import PIPELINES
from streams.pipelines.options import number_or_text
from streams.ports import PortUnavailable
from streams.worker.config import (
    WorkerConfig,
    session_timeout_from_env,
    topic_prefix_from_env,
)
from streams.worker.runner import run_worker

log = logging.getLogger("streams.worker")


def option_value(text: str) -> int | float | str:
    """A pipeline option from text: an integer or a decimal number if it reads as one."""
    return number_or_text(text)


def parse_options(
    pairs: Sequence[str], convert: Callable[[str], Any] = option_value
) -> dict[str, Any]:
    """``["latency_ms=200", "outage_file=/tmp/x"]`` -> ``{"latency_ms": 200, ...}``.

    ``convert`` makes each value; the worker passes ``str``, leaving the text to
    ``build_pipeline``, which converts it as the factory's annotation asks (an option
    annotated ``str`` keeps "0123" as it is).
    """
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidInput("option", f"expected key=value, got {pair!r}")
        options[key] = convert(value)
    return options


@dataclass(frozen=True)
class WorkerArgs:
    """The worker's options as given (None: not given; the settings' defaults apply)."""

    pipeline: str
    concurrency: int | None = None
    buffer: int | None = None
    route: str = "default"
    group: str | None = None
    prefix: str | None = None
    grace_s: float = 10.0
    max_task_s: float = 600.0
    host: str = "127.0.0.1"
    port: int | None = None
    instance_id: str | None = None
    session_timeout_ms: int | None = None
    bootstrap_servers: str | None = None
    option: tuple[str, ...] = ()
    log_level: str = "INFO"


def worker(
    pipeline: Annotated[
        str,
        typer.Option(
            help=f"{', '.join(sorted(PIPELINES))}, or your own as module:factory",
            show_default=False,
        ),
    ],
    concurrency: Annotated[
        int | None,
        typer.Option(
            help="handler calls at once: threads for a sync handler (4), tasks on one event "
            "loop for an async one (100)"
        ),
    ] = None,
    buffer: Annotated[
        int | None, typer.Option(help="tasks fetched beyond the running ones (twice --concurrency)")
    ] = None,
    route: Annotated[
        str,
        typer.Option(
            metavar="PIPELINE",
            help="serve the streams of this pipeline (`streams create --pipeline`), reading only "
            "its tasks ({prefix}.tasks.PIPELINE); default: the default pipeline, on {prefix}.tasks",
        ),
    ] = "default",
    group: Annotated[
        str | None,
        typer.Option(
            help="consumer group (default: {prefix}-workers-{route}, "
            "or -{pipeline} for the default)"
        ),
    ] = None,
    prefix: Annotated[
        str | None, typer.Option(help="topic prefix [env TIDEMARK_TOPIC_PREFIX, tidemark]")
    ] = None,
    grace_s: Annotated[
        float, typer.Option("--grace-s", help="shutdown grace for running tasks")
    ] = 10.0,
    max_task_s: Annotated[
        float,
        typer.Option(
            "--max-task-s",
            help="stop heartbeating a handler running this long, so it can time out; an async "
            "handler is cancelled then and nacked `timeout`",
        ),
    ] = 600.0,
    host: Annotated[str, typer.Option(help="address of /metrics and /health")] = "127.0.0.1",
    port: Annotated[
        int | None,
        typer.Option(min=0, max=65535, help="serve /metrics and /health on this port [none]"),
    ] = None,
    instance_id: Annotated[
        str | None,
        typer.Option(help="static group membership id (group.instance.id); one per process"),
    ] = None,
    session_timeout_ms: Annotated[
        int | None,
        typer.Option(help="group session timeout [env TIDEMARK_SESSION_TIMEOUT_MS, 10000]"),
    ] = None,
    bootstrap_servers: Annotated[
        str | None, typer.Option(help="Kafka bootstrap servers [env KAFKA_BOOTSTRAP_SERVERS]")
    ] = None,
    option: Annotated[
        list[str] | None,
        typer.Option(
            metavar="KEY=VALUE",
            help="a pipeline build option, converted to the type the pipeline declares; an "
            "undeclared one is a number if it reads as one (repeatable)",
        ),
    ] = None,
    log_level: Annotated[str, typer.Option(help="logging level")] = "INFO",
    metrics_host: Annotated[str | None, typer.Option(hidden=True)] = None,
    metrics_port: Annotated[int | None, typer.Option(min=0, max=65535, hidden=True)] = None,
    loglevel: Annotated[str | None, typer.Option(hidden=True)] = None,
) -> None:
    """Consume task windows, run a pipeline on each, answer on the results topic.

    `tidemark worker --pipeline synthetic --concurrency 4`. Exit codes: 0 after a clean stop,
    1 if the worker failed, 2 for bad arguments or pipeline options.
    """
    args = WorkerArgs(
        pipeline=pipeline,
        concurrency=concurrency,
        buffer=buffer,
        route=route,
        group=group,
        prefix=prefix,
        grace_s=grace_s,
        max_task_s=max_task_s,
        host=aliased(host, metrics_host, "--metrics-host", "--host"),
        port=aliased(port, metrics_port, "--metrics-port", "--port"),
        instance_id=instance_id,
        session_timeout_ms=session_timeout_ms,
        bootstrap_servers=bootstrap_servers,
        option=tuple(option or ()),
        log_level=aliased(log_level, loglevel, "--loglevel", "--log-level"),
    )
    raise typer.Exit(run(args))


def _command() -> Any:
    """The worker as a click command of its own (for `python -m streams.worker` and tests)."""
    single = typer.Typer(add_completion=False, rich_markup_mode=None)
    single.command()(worker)
    return typer.main.get_command(single)


def parse_args(argv: Sequence[str]) -> WorkerArgs:
    """The options `argv` gives, as `worker` reads them (a bad one raises click's usage error)."""
    params = _command().make_context("tidemark worker", list(argv)).params
    for old, new in (("metrics_host", "host"), ("metrics_port", "port"), ("loglevel", "log_level")):
        old_value = params.pop(old)
        if old_value is not None:
            params[new] = old_value
    return WorkerArgs(**{**params, "option": tuple(params["option"] or ())})


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), run the worker, return its exit code."""
    return run_as_program(_command(), argv, "tidemark worker")


def run(args: WorkerArgs) -> int:
    """Run the worker these options describe; its exit code (2 for bad options)."""
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    settings = KafkaSettings.from_env()
    if args.bootstrap_servers:
        settings = replace(settings, bootstrap_servers=args.bootstrap_servers)
    try:
        config = WorkerConfig(
            pipeline=args.pipeline,
            topic_prefix=args.prefix or topic_prefix_from_env(),
            group_id=args.group,
            route=args.route,
            concurrency=args.concurrency,
            buffer=args.buffer,
            grace_s=args.grace_s,
            max_task_s=args.max_task_s,
            instance_id=args.instance_id,
            session_timeout_ms=args.session_timeout_ms or session_timeout_from_env(),
        )
        options = parse_options(args.option, convert=str)
        web = "none" if args.port is None else f"http://{args.host}:{args.port}/metrics"
        log.info(
            "tidemark worker %s starting: pipeline %s, route %s, group %s, topics %s.*, "
            "Kafka %s, /metrics and /health %s",
            buildinfo.version(), config.pipeline, config.route, config.group,
            config.topic_prefix, settings.bootstrap_servers, web,
        )  # fmt: skip
        code = run_worker(
            config,
            options=options,
            settings=settings,
            metrics_port=args.port,
            metrics_host=args.host,
        )
        log.info("tidemark worker stopped (exit code %d)", code)
        return code
    except (InvalidInput, PortUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
