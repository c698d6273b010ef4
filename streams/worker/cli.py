"""``python -m streams.worker``: run one worker process from the command line.

    python -m streams.worker --pipeline synthetic --concurrency 8 --option latency_ms=200
    python -m streams.worker --pipeline windowlog:WindowLog --route logs

Kafka is found through the environment (``KAFKA_BOOTSTRAP_SERVERS`` and the ``KAFKA_*``
security variables of ``KafkaSettings.from_env``), or ``--bootstrap-servers``. Exit codes:
0 after a clean stop, 1 if the worker failed, 2 for bad arguments or pipeline options.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m streams.worker",
        description="Consume task windows, run a pipeline on each, answer on the results topic.",
    )
    parser.add_argument(
        "--pipeline",
        required=True,
        help=f"{', '.join(sorted(PIPELINES))}, or your own as module:factory",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="handler calls at once: threads for a sync handler (4), tasks on one event loop "
        "for an async one (100)",
    )
    parser.add_argument(
        "--buffer",
        type=int,
        default=None,
        help="tasks fetched beyond the running ones (twice --concurrency)",
    )
    parser.add_argument(
        "--route",
        default="default",
        metavar="PIPELINE",
        help="serve the streams of this pipeline (`streams create --pipeline`), reading only its "
        "tasks ({prefix}.tasks.PIPELINE); default: the default pipeline, on {prefix}.tasks",
    )
    parser.add_argument(
        "--group",
        help="consumer group (default: {prefix}-workers-{route}, or -{pipeline} for the default)",
    )
    parser.add_argument(
        "--prefix", default=None, help="topic prefix (env TIDEMARK_TOPIC_PREFIX, or tidemark)"
    )
    parser.add_argument(
        "--grace-s", type=float, default=10.0, help="shutdown grace for running tasks (10)"
    )
    parser.add_argument(
        "--max-task-s",
        type=float,
        default=600.0,
        help="stop heartbeating a handler running this long, so it can time out; an async "
        "handler is cancelled then and nacked `timeout` (600)",
    )
    parser.add_argument("--metrics-port", type=int, help="serve /metrics on this port")
    parser.add_argument("--metrics-host", default="127.0.0.1", help="/metrics address")
    parser.add_argument(
        "--instance-id", help="static group membership id (group.instance.id); one per process"
    )
    parser.add_argument(
        "--session-timeout-ms",
        type=int,
        default=None,
        help="group session timeout (env TIDEMARK_SESSION_TIMEOUT_MS, or 10000)",
    )
    parser.add_argument("--bootstrap-servers", help="Kafka (default: env KAFKA_BOOTSTRAP_SERVERS)")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a pipeline build option, converted to the type the pipeline declares; an "
        "undeclared one is a number if it reads as one (repeatable)",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (INFO)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), run the worker, return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
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
        return run_worker(
            config,
            options=options,
            settings=settings,
            metrics_port=args.metrics_port,
            metrics_host=args.metrics_host,
        )
    except (InvalidInput, PortUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
