"""`tidemark sources set|show|list|delete`: the limits of the sources streams read from.

`set` and `delete` send a `source_set` or `source_delete` on `control` (streams.wire.sources);
a coordinator applies it by publishing the source's entry (or its tombstone) on the compacted
`sources` view, which `show` and `list` read. Both wait, bounded, until the view shows it, and
say so if it did not (exit 1), or if a coordinator rejected it.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer

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
from streams.commands.source_limits import (
    check_alone,
    entry_doc,
    merge,
    parse_changes,
    source_table,
    sources_table,
)
from streams.core.admission import SourceControl, SourceDelete, SourceSet
from streams.errors import InvalidInput, TidemarkError
from streams.kafka.compacted import LatestEntries
from streams.kafka.topic_io import TopicReader, send
from streams.wire import (
    SourceEntry,
    decode_rejected,
    decode_source_entry,
    encode_control,
    source_control_key,
    source_view_key,
)

# How long `set` and `delete` wait for a coordinator to apply them.
APPLY_WAIT_S = 10.0

app = typer.Typer(
    help="Set, show, list and delete the limits of the sources streams read from "
    "(bounds: streams/core/admission/limits.py).",
    no_args_is_help=True,
)

Name = Annotated[
    str,
    typer.Argument(
        metavar="NAME",
        help="the source, as its streams name it (streams create --source NAME)",
        show_default=False,
    ),
]


def _limit(flag: str, metavar: str, help_text: str) -> Any:
    return typer.Option(flag, metavar=metavar, help=help_text, show_default=False)


MaxInFlight = Annotated[
    str | None,
    _limit(
        "--max-in-flight", "N|none",
        "tasks of the source dispatched and not yet answered, across every coordinator; "
        "none: no cap [none]",
    ),
]  # fmt: skip
RatePerS = Annotated[
    str | None,
    _limit("--rate-per-s", "R|none", "dispatches per second (a token bucket); none: no rate "
                                     "[none]"),
]  # fmt: skip
Burst = Annotated[
    str | None,
    _limit("--burst", "B|none", "the bucket's size, only with a rate; none: max(1, ceil(rate)), "
                                "which then follows the rate [none]"),
]  # fmt: skip
BackfillShare = Annotated[
    str | None,
    _limit("--backfill-share", "F", "the part of the cap catching-up and replayed windows keep "
                                    "while live ones wait, 0 <= F < 1 [0.2]"),
]  # fmt: skip
PaceStart = Annotated[
    str | None,
    _limit("--pace-start", "N", "the concurrency a recovery from outage starts at [4]"),
]


@app.command("set")
@friendly_errors
def set_(
    ctx: typer.Context,
    name: Name,
    max_in_flight: MaxInFlight = None,
    rate_per_s: RatePerS = None,
    burst: Burst = None,
    backfill_share: BackfillShare = None,
    pace_start: PaceStart = None,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Set a source's limits, starting from its current ones: what is not given stays as it
    is, and `none` unsets an optional one (--max-in-flight none: no cap).

    Defaults in brackets are those of a source without limits. Waits up to 10 s until a
    coordinator has applied them (the `sources` view shows them); exit 1 if none did.
    """
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    given = {
        "max_in_flight": max_in_flight,
        "rate_per_s": rate_per_s,
        "burst": burst,
        "backfill_share": backfill_share,
        "pace_start": pace_start,
    }
    changes = parse_changes(given)
    check_alone(name, changes)  # bad input is reported before anything talks to Kafka
    env.connect(require=["control", "sources", "rejected"])
    view = _view(env)
    try:
        current = view.entries.get(source_view_key(name))
        limits = merge(name, None if current is None else current.limits, changes)
        applied = _apply(env, view, SourceSet(limits))
    finally:
        view.close()
    _report(env, SourceSet(limits), applied, f"set the limits of source {name!r}")


@app.command()
@friendly_errors
def delete(
    ctx: typer.Context,
    name: Name,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Delete a source's limits: it is unlimited again (its recoveries are still paced, with
    the defaults). Waits up to 10 s until a coordinator has applied it."""
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    check_alone(name, {})
    env.connect(require=["control", "sources", "rejected"])
    view = _view(env)
    try:
        _known(view.entries, name)
        if not yes:
            typer.confirm(
                f"Delete the limits of source {name!r} (it is then unlimited)?",
                abort=True,
                err=True,
            )
        applied = _apply(env, view, SourceDelete(name))
    finally:
        view.close()
    _report(env, SourceDelete(name), applied, f"deleted the limits of source {name!r}")


@app.command()
@friendly_errors
def show(
    ctx: typer.Context,
    name: Name,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """One source's limits, and when a coordinator applied them."""
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    env.connect(require=["sources"])
    view = _view(env)
    view.close()
    entry = _known(view.entries, name)
    if env.json:
        print_json(entry_doc(entry))
    else:
        console().print(source_table(entry))


@app.command("list")
@friendly_errors
def list_(
    ctx: typer.Context,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Every source with limits, by name (a source not listed is unlimited)."""
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    env.connect(require=["sources"])
    view = _view(env)
    view.close()
    entries = sorted(view.entries.values(), key=lambda e: e.limits.source)
    if env.json:
        print_json([entry_doc(e) for e in entries])
    elif entries:
        console().print(sources_table(entries))
    else:
        console().print(f"no source limits on {env.topics.sources}: every source is unlimited")


def _view(env: CliEnv) -> LatestEntries[SourceEntry]:
    """The `sources` view read to its end (reading on continues where it stopped)."""
    view = LatestEntries(env.settings, env.topics.sources, decode_source_entry)
    try:
        view.read(READ_TIMEOUT_S)
    except BaseException:
        view.close()
        raise
    return view


def _known(entries: dict[bytes, SourceEntry], name: str) -> SourceEntry:
    entry = entries.get(source_view_key(name))
    if entry is None:
        raise TidemarkError(
            f"source {name!r} has no limits (it is unlimited); set some with `tidemark sources set`"
        )
    return entry


def _apply(env: CliEnv, view: LatestEntries[SourceEntry], control: SourceControl) -> bool:
    """Send `control` and wait, up to APPLY_WAIT_S, until the view shows a coordinator applied
    it: True if it did, False if not in time; TidemarkError if a coordinator rejected it."""
    key = source_view_key(control.source)
    before = view.entries.get(key)
    control_key, body = source_control_key(control.source), encode_control(control)
    rejected = TopicReader(env.settings, [env.topics.rejected], "tidemark-sources")
    try:
        rejected.start(from_end=True, timeout_s=env.connect_timeout_s)
        send(env.settings, env.topics.control, control_key, body)
        deadline = time.monotonic() + APPLY_WAIT_S
        while time.monotonic() < deadline:
            now = view.read(min(1.0, max(deadline - time.monotonic(), 0.1))).get(key)
            if now is not before and (now is None) == isinstance(control, SourceDelete):
                return True
            for record in rejected.poll(0.2):
                if record.key == control_key:
                    _check_rejection(env, record.value, body)
    finally:
        rejected.close()
    return False


def _check_rejection(env: CliEnv, raw: bytes | None, body: bytes) -> None:
    """Raise the coordinator's reason if `raw` is its rejection of the control `body`."""
    try:
        rejection = decode_rejected(raw)
    except InvalidInput:
        return  # nothing a coordinator writes
    if rejection.source_topic == env.topics.control and rejection.value == body.decode():
        raise TidemarkError(f"a coordinator rejected it: {rejection.reason}")


def _report(env: CliEnv, control: SourceControl, applied: bool, done: str) -> None:
    sent = json.loads(encode_control(control))
    if env.json:
        print_json({"sent": sent, "topic": env.topics.control, "applied": applied})
    elif applied:
        shown = {k: v for k, v in sent.items() if k not in ("type", "source")}
        console().print(done + ("" if not shown else f": {_fields(shown)}"))
    if not applied:
        console(stderr=True).print(
            f"warning: sent, but no coordinator applied it within {APPLY_WAIT_S:g} s (is one "
            f"running? it applies it once it reads {env.topics.control})"
        )
        raise typer.Exit(1)


def _fields(fields: dict[str, Any]) -> str:
    return ", ".join(f"{k} {'none' if v is None else v}" for k, v in fields.items())
