"""`tidemark tail TOPIC`: print a topic's values as they arrive, to --max, --timeout or Ctrl-C."""

from __future__ import annotations

import json
import os
import sys
import time
from enum import StrEnum
from typing import Annotated, Any

import typer

from streams.commands.common import (
    BootstrapOpt,
    CliEnv,
    OutputOpt,
    PrefixOpt,
    console,
    friendly_errors,
)
from streams.errors import InvalidInput
from streams.humanize import format_duration, format_time
from streams.kafka.topic_io import TopicReader, TopicRecord


class TailTopic(StrEnum):
    commits = "commits"
    tasks = "tasks"
    results = "results"
    bypassed = "bypassed"
    rejected = "rejected"


@friendly_errors
def tail(
    ctx: typer.Context,
    topic: Annotated[TailTopic, typer.Argument(metavar="TOPIC", help="which topic to print")],
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="start at the oldest record, not now")
    ] = False,
    max_records: Annotated[
        int | None, typer.Option("--max", min=1, help="stop after this many records")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option(min=0, help="stop after this many seconds")
    ] = None,
    pipeline: Annotated[
        str | None,
        typer.Option(
            "--pipeline",
            metavar="NAME",
            help="with tasks: the tasks of this pipeline ({prefix}.tasks.NAME) [the default one]",
        ),
    ] = None,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Print each record of a topic as it arrives; Ctrl-C stops.

    Text shows the record's time, key and value; --output json prints one JSON object a line:
    {"topic", "partition", "offset", "timestamp_ms", "key", "value"} (value null: a tombstone).
    """
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    name = f"{env.topics.prefix}.{topic.value}"
    if pipeline is not None:
        if topic is not TailTopic.tasks:
            raise InvalidInput("--pipeline", "names the tasks topic of a pipeline: tail tasks")
        try:
            name = env.topics.tasks_for(pipeline)
        except InvalidInput as exc:
            raise InvalidInput("--pipeline", exc.reason) from None
    env.connect(require=[name.removeprefix(f"{env.topics.prefix}.")])
    reader = TopicReader(env.settings, [name], "tidemark-tail")
    try:
        reader.start(from_end=not from_beginning, timeout_s=env.connect_timeout_s)
        where = "the beginning" if from_beginning else "now"
        console(stderr=True).print(f"tailing {name} from {where} (Ctrl-C to stop)")
        _follow(reader, topic.value, env.json, max_records, timeout)
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:  # `tidemark tail ... | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        reader.close()


def _follow(
    reader: TopicReader,
    short: str,
    as_json: bool,
    max_records: int | None,
    timeout_s: float | None,
) -> None:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    printed = 0
    while max_records is None or printed < max_records:
        wait_s = 0.1 if deadline is None else min(deadline - time.monotonic(), 0.1)
        if wait_s <= 0:
            return
        want = 500 if max_records is None else min(max_records - printed, 500)
        for record in reader.poll(wait_s, want):
            line = json.dumps(_doc(short, record)) if as_json else _text_line(record)
            sys.stdout.write(line + "\n")
            printed += 1
        sys.stdout.flush()


def _doc(short: str, record: TopicRecord) -> dict[str, Any]:
    return {
        "topic": short,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp_ms": record.timestamp_ms,
        "key": None if record.key is None else record.key.decode("utf-8", "replace"),
        "value": _value(record.value),
    }


def _value(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


# Fields of the wire's records that hold a duration; every other `*_ms` integer is a time.
_DURATION_FIELDS = frozenset(
    {
        "behind_ms", "bypass_after_ms", "bypass_retention_ms", "delay_ms", "gc_grace_ms",
        "held_ms", "initial_ms", "interval_ms", "max_ms", "outage_max_hold_ms",
        "retry_delay_ms", "step_ms", "task_timeout_ms", "waited_ms", "window_ms",
    }
)  # fmt: skip


def humanized(value: Any) -> Any:
    """A record's value for people: `*_ms` times as ISO-8601 UTC, durations as `1m30s`
    (the JSON output keeps the milliseconds)."""
    if isinstance(value, dict):
        return {k: _field(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [humanized(v) for v in value]
    return value


def _field(key: str, value: Any) -> Any:
    if not key.endswith("_ms") or type(value) is not int:
        return humanized(value)
    return format_duration(value) if key in _DURATION_FIELDS else format_time(value)


def _text_line(record: TopicRecord) -> str:
    key = "-" if record.key is None else record.key.decode("utf-8", "replace")
    value = record.value
    shown = (
        "(tombstone)"
        if value is None
        else json.dumps(humanized(_value(value)), separators=(",", ":"))
    )
    when = "-" if record.timestamp_ms is None else format_time(record.timestamp_ms)
    return f"{when} {key} {shown}"
