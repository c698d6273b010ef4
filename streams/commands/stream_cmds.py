"""`tidemark streams create|update|pause|resume|delete|list|show`."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from streams.clock import now_ms
from streams.commands.backlog import backlog_warning
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
from streams.commands.flags import ConfigFlags, validated
from streams.commands.pipeline_cmds import check_registered_params
from streams.commands.stream_options import (
    BypassAfter,
    BypassRetention,
    Delay,
    End,
    GcGrace,
    MaxAttempts,
    MaxInFlight,
    NonRetryable,
    Param,
    ParamsJson,
    PipelineOpt,
    Retry,
    Source,
    Step,
    Stream,
    Timeout,
    Window,
)
from streams.commands.views import by_lag, print_stream, stream_doc, streams_table
from streams.commands.views import bypass_doc as bypass_json
from streams.core import Control, Delete, Pause, Resume, Upsert, config_from_dict
from streams.core.config import DEFAULT_PIPELINE
from streams.core.view import STATUSES
from streams.errors import InvalidInput, TidemarkError
from streams.humanize import format_duration, format_time
from streams.kafka.pipelines import ensure_tasks_topic
from streams.kafka.topic_io import send
from streams.readmodel import TOPICS, ReadModel, ReadView
from streams.wire import encode_control, stream_key

app = typer.Typer(
    help="Create, change, pause, resume, delete and inspect streams.",
    no_args_is_help=True,
)


@app.command()
@friendly_errors
def create(
    ctx: typer.Context,
    stream: Stream,
    start: Annotated[
        str,
        typer.Option(
            metavar="TIME",
            help="where the timeline starts: 2026-11-29T10:00:00Z, now, now-1h or epoch ms",
            show_default=False,
        ),
    ],
    window: Window = None,
    step: Step = None,
    delay: Delay = None,
    timeout: Timeout = None,
    bypass_after: BypassAfter = None,
    retry: Retry = None,
    max_attempts: MaxAttempts = None,
    non_retryable: NonRetryable = None,
    max_in_flight: MaxInFlight = None,
    param: Param = None,
    params_json: ParamsJson = None,
    end: End = None,
    gc_grace: GcGrace = None,
    bypass_retention: BypassRetention = None,
    source: Source = None,
    pipeline: PipelineOpt = None,
    paused: Annotated[
        bool,
        typer.Option(
            "--paused",
            help="create it paused: nothing is dispatched until `tidemark streams resume`",
        ),
    ] = False,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Create a stream: its windows are dispatched from --start on.

    Its params are checked against the schema its pipeline's workers announced, if any.
    """
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    flags = ConfigFlags(
        start, window, step, delay, timeout, bypass_after, retry, max_attempts,
        non_retryable, max_in_flight, param, params_json, end, gc_grace, bypass_retention, source,
        pipeline,
    )  # fmt: skip
    now = now_ms()
    config = validated(flags.merge({"stream_id": stream}, now))
    warning = backlog_warning(config, now)
    if warning:
        console(stderr=True).print(f"warning: {warning}", soft_wrap=True)
    env.connect(require=["control", "streams"])
    if _read(env, ("streams",)).stream(stream) is not None:
        raise TidemarkError(
            f"stream {stream!r} already exists; change it with `tidemark streams update`"
        )
    check_registered_params(env, config)
    _ensure_tasks_topic(env, config)
    _upsert(env, config, "created paused" if paused else "created", paused)


@app.command()
@friendly_errors
def update(
    ctx: typer.Context,
    stream: Stream,
    window: Window = None,
    step: Step = None,
    delay: Delay = None,
    timeout: Timeout = None,
    bypass_after: BypassAfter = None,
    retry: Retry = None,
    max_attempts: MaxAttempts = None,
    non_retryable: NonRetryable = None,
    max_in_flight: MaxInFlight = None,
    param: Param = None,
    params_json: ParamsJson = None,
    end: End = None,
    gc_grace: GcGrace = None,
    bypass_retention: BypassRetention = None,
    source: Source = None,
    pipeline: PipelineOpt = None,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Change a stream's config; what is not given stays as it is.

    Progress never moves on a change (the start stays), and windows already dispatched keep
    their bounds. --params-json replaces all params, --param sets single keys.
    """
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    flags = ConfigFlags(
        None, window, step, delay, timeout, bypass_after, retry, max_attempts,
        non_retryable, max_in_flight, param, params_json, end, gc_grace, bypass_retention, source,
        pipeline,
    )  # fmt: skip
    flags.changes(now_ms())  # bad input is reported before anything talks to Kafka
    current = _existing(env, stream)
    config = validated(flags.merge(current.config, now_ms()))
    check_registered_params(env, config)
    _ensure_tasks_topic(env, config)
    _upsert(env, config, "updated")


@app.command()
@friendly_errors
def pause(
    ctx: typer.Context,
    stream: Stream,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Stop dispatching a stream's windows (results and deadlines are still handled)."""
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    _existing(env, stream)
    _control(env, Pause(stream), "paused")


@app.command()
@friendly_errors
def resume(
    ctx: typer.Context,
    stream: Stream,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Dispatch a paused stream's windows again."""
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    _existing(env, stream)
    _control(env, Resume(stream), "resumed")


@app.command()
@friendly_errors
def delete(
    ctx: typer.Context,
    stream: Stream,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Forget a stream, its progress and its bypassed windows (the coordinator unlists them)."""
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    _existing(env, stream)
    if not yes:
        try:
            sure = typer.confirm(f"Delete stream {stream!r} and its progress?", err=True)
        except typer.Abort:  # no terminal to answer from (stdin closed), or Ctrl-C
            raise TidemarkError(
                f"stream {stream!r} not deleted: no answer to the question; "
                "pass --yes to delete without asking"
            ) from None
        if not sure:
            raise TidemarkError(
                f"stream {stream!r} not deleted; pass --yes to delete without asking"
            )
    _control(env, Delete(stream), "deleted")


@app.command("list")
@friendly_errors
def list_(
    ctx: typer.Context,
    state: Annotated[
        str | None,
        typer.Option(
            "--state",
            metavar="STATE",
            help=f"only the streams in this state: {', '.join(STATUSES)}",
            show_default=False,
        ),
    ] = None,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Every stream, the most lagging first: downstream time, lag, state, attempt, bypasses."""
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    wanted = None if state is None else _state(state)
    env.connect()
    model = _read(env)
    now = now_ms()
    views = by_lag(model.streams(), now)
    if wanted is not None:
        views = [view for view in views if view.state(now) == wanted]
    if env.json:
        print_json([stream_doc(view, now, config=False) for view in views])
    elif views:
        console().print(streams_table(views, now))
    elif wanted is not None:
        console().print(f"no {wanted} streams on {env.topics.streams}")
    else:
        console().print(f"no streams on {env.topics.streams}")


def _state(text: str) -> str:
    """`--state`'s value as one of streams.core.view's states (`catching-up` too)."""
    wanted = text.strip().lower().replace("-", " ").replace("_", " ")
    if wanted not in STATUSES:
        raise InvalidInput("--state", f"{text!r} is not a state; use one of {', '.join(STATUSES)}")
    return wanted


@app.command()
@friendly_errors
def show(
    ctx: typer.Context,
    stream: Stream,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """One stream in detail: config, current window, last error, bypassed windows."""
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    env.connect()
    model = _read(env)
    view = _known(model, stream)
    bypasses = sorted(
        (b for b in model.bypasses() if b.stream_id == stream), key=lambda b: b.start_ms
    )
    now = now_ms()
    if env.json:
        print_json({**stream_doc(view, now), "bypassed": [bypass_json(b) for b in bypasses]})
    else:
        print_stream(console(), view, bypasses, now)


def _read(env: CliEnv, topics: tuple[str, ...] | None = None) -> ReadModel:
    """A read model of the topics, caught up (or a warning on stderr if that took too long)."""
    model = ReadModel(env.settings, env.topics.prefix, topics or TOPICS)
    try:
        model.read_all(READ_TIMEOUT_S)
    finally:
        model.close()
    if not model.caught_up:
        console(stderr=True).print(
            f"warning: the topics were not read to their end (nothing came for "
            f"{READ_TIMEOUT_S:g} s); this view may be behind"
        )
    return model


def _known(model: ReadModel, stream: str) -> ReadView:
    view = model.stream(stream)
    if view is None:
        raise TidemarkError(f"unknown stream {stream!r}")
    return view


def _existing(env: CliEnv, stream: str) -> ReadView:
    """The stream as its view on `streams` shows it, or an error if it is unknown or deleted."""
    env.connect(require=["control", "streams"])
    return _known(_read(env, ("streams",)), stream)


def _ensure_tasks_topic(env: CliEnv, config: dict[str, Any]) -> None:
    """Make the tasks topic of the stream's pipeline before the coordinator sends it a task
    (the coordinator would make it too; whoever comes first)."""
    pipeline = config.get("pipeline", DEFAULT_PIPELINE)
    if pipeline != DEFAULT_PIPELINE and ensure_tasks_topic(env.settings, env.topics, pipeline):
        console(stderr=True).print(f"made {env.topics.tasks_for(pipeline)}, the tasks topic of "
                                   f"pipeline {pipeline!r}")  # fmt: skip


def _control(env: CliEnv, control: Pause | Resume | Delete, done: str) -> None:
    value = _send(env, control)
    _report(env, value, f"{done} stream {control.stream_id!r}")


def _upsert(env: CliEnv, config: dict[str, Any], done: str, paused: bool = False) -> None:
    value = _send(env, Upsert(config_from_dict(config), paused=paused))
    pipeline = config.get("pipeline")
    _report(
        env,
        value,
        f"{done} stream {config['stream_id']!r}: windows of "
        f"{format_duration(config['window_ms'])} every {format_duration(config['step_ms'])} "
        f"from {format_time(config['start_ms'])}"
        + ("" if pipeline is None else f", for the workers of pipeline {pipeline!r}"),
    )


def _send(env: CliEnv, control: Control) -> dict[str, Any]:
    """Send `control` keyed by its stream; what was sent, for --output json."""
    stream_id = control.config.stream_id if isinstance(control, Upsert) else control.stream_id
    body = encode_control(control)
    send(env.settings, env.topics.control, stream_key(stream_id), body)
    return dict(json.loads(body))


def _report(env: CliEnv, value: dict[str, Any], text: str) -> None:
    if env.json:
        print_json({"sent": value, "topic": env.topics.control})
    else:
        console().print(text)
