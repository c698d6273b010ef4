"""`tidemark replay STREAM --from T --to T`: dispatch bypassed windows again, and watch them.

The coordinator replays every listed window overlapping (from, to]. A success unlists the window
(a tombstone on `bypassed`) and is announced on `commits` as a window of reason "replayed"; a
failure lists it again with its attempts (a new value on `bypassed`). The watch starts at the end
of both topics before the request is sent, so that no outcome is missed.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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
from streams.commands.views import bypass_doc, error_text, print_bypasses, window_text
from streams.core import BypassRecord, Commit, Replay
from streams.errors import InvalidInput, TidemarkError
from streams.humanize import format_time, parse_time_ms
from streams.kafka.settings import KafkaSettings
from streams.kafka.topic_io import TopicReader, TopicRecord, send
from streams.readmodel import BypassView, ReadModel
from streams.topics import Topics
from streams.wire import (
    Bypassed,
    RejectedMessage,
    decode_bypassed,
    decode_commit,
    decode_control,
    decode_rejected,
    encode_control,
    stream_key,
)


@friendly_errors
def replay(
    ctx: typer.Context,
    stream: Annotated[
        str, typer.Argument(metavar="STREAM", help="the stream id", show_default=False)
    ],
    from_: Annotated[
        str,
        typer.Option(
            "--from",
            metavar="TIME",
            help="range start: 2026-11-29T10:00:00Z, now-1h or epoch ms",
            show_default=False,
        ),
    ],
    to: Annotated[str, typer.Option("--to", metavar="TIME", help="range end", show_default=False)],
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="show progress until the replay finishes")
    ] = True,
    timeout: Annotated[
        float | None, typer.Option(min=0, help="stop waiting after this many seconds")
    ] = None,
    output: OutputOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Dispatch the stream's bypassed windows overlapping (--from, --to] again.

    Replays run beside live windows and never move downstream_ms. Exit 0 once every window is
    replayed, 1 if one failed again (it stays listed) or --timeout passed first.
    """
    env = CliEnv.of(ctx, output, bootstrap_servers, prefix)
    now = now_ms()
    from_ms = parse_time_ms(from_, now, "--from")
    to_ms = parse_time_ms(to, now, "--to")
    if to_ms <= from_ms:
        raise InvalidInput("--to", f"must be after --from ({format_time(from_ms)})")
    env.connect(require=["control", "bypassed", "commits"])
    windows = _listed(env, stream, from_ms, to_ms)
    if not windows:
        _nothing(env, stream, from_ms, to_ms)
        return
    request = Replay(stream, from_ms, to_ms)
    watch = ReplayWatch.start(env.settings, env.topics, request, windows) if wait else None
    try:
        send(env.settings, env.topics.control, stream_key(stream), encode_control(request))
        if watch is None:
            _requested(env, request, windows)
            return
        _wait(env, watch, timeout)
    finally:
        if watch is not None:
            watch.close()
    _summary(env, watch)


def _listed(env: CliEnv, stream: str, from_ms: int, to_ms: int) -> list[BypassView]:
    model = ReadModel(env.settings, env.topics.prefix, ("streams", "bypassed"))
    try:
        model.read_all(READ_TIMEOUT_S)
    finally:
        model.close()
    if model.stream(stream) is None:
        raise TidemarkError(f"unknown stream {stream!r}")
    windows = [
        b
        for b in model.bypasses()
        if b.stream_id == stream and b.start_ms < to_ms and b.end_ms > from_ms
    ]
    return sorted(windows, key=lambda b: b.start_ms)


@dataclass
class ReplayWatch:
    """Follows `bypassed` and `commits` from their ends for the outcome of each window, and
    `rejected` for the coordinator turning the request down."""

    stream_id: str
    windows: dict[int, BypassView]
    reader: TopicReader
    topics: Topics
    request: Replay
    replayed: set[int] = field(default_factory=set)
    failed: dict[int, BypassRecord] = field(default_factory=dict)  # as relisted
    rejected: str | None = None  # the coordinator's reason

    @classmethod
    def start(
        cls,
        settings: KafkaSettings,
        topics: Topics,
        request: Replay,
        windows: list[BypassView],
    ) -> ReplayWatch:
        names = [topics.bypassed, topics.commits, topics.rejected]
        reader = TopicReader(settings, names, "tidemark-replay")
        try:
            reader.start(from_end=True, timeout_s=10)
        except BaseException:
            reader.close()
            raise
        by_start = {w.start_ms: w for w in windows}
        return cls(request.stream_id, by_start, reader, topics, request)

    @property
    def pending(self) -> list[int]:
        if self.rejected is not None:
            return []
        return [s for s in self.windows if s not in self.replayed and s not in self.failed]

    def poll(self, timeout_s: float) -> None:
        for record in self.reader.poll(timeout_s):
            self._on(record)

    def _on(self, msg: TopicRecord) -> None:
        try:
            if msg.topic == self.topics.rejected:
                self._on_rejected(decode_rejected(msg.value))
            elif msg.topic == self.topics.bypassed:
                self._on_bypassed(decode_bypassed(msg.key, msg.value))
            else:
                self._on_commit(decode_commit(msg.value))
        except InvalidInput:
            return  # nothing the coordinator writes: no outcome of ours

    def _on_rejected(self, rejection: RejectedMessage) -> None:
        value = rejection.value
        if rejection.source_topic != self.topics.control or value is None:
            return
        if decode_control(value.encode()) == self.request:
            self.rejected = rejection.reason

    def _on_bypassed(self, bypassed: Bypassed) -> None:
        start_ms = bypassed.start_ms
        if bypassed.stream_id == self.stream_id and start_ms in self.pending:
            if bypassed.record is None:
                self.replayed.add(start_ms)
            else:
                self.failed[start_ms] = bypassed.record

    def _on_commit(self, commit: Commit) -> None:
        if commit.stream_id != self.stream_id:
            return
        pending = self.pending
        for window in commit.windows:
            if window.reason == "replayed" and window.start_ms in pending:
                self.replayed.add(window.start_ms)

    def close(self) -> None:
        self.reader.close()


def _wait(env: CliEnv, watch: ReplayWatch, timeout_s: float | None) -> None:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    columns = (
        TextColumn("replaying {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console(stderr=True), transient=env.json) as progress:
        bar = progress.add_task(watch.stream_id, total=len(watch.windows), failed=0)
        while watch.pending and (deadline is None or time.monotonic() < deadline):
            watch.poll(0.25)
            done = len(watch.replayed) + len(watch.failed)
            progress.update(bar, completed=done, failed=len(watch.failed))


def _summary(env: CliEnv, watch: ReplayWatch) -> None:
    if watch.rejected is not None:
        raise TidemarkError(
            f"the coordinator rejected the replay: {watch.rejected}; see what is listed with "
            f"`tidemark streams show {shlex.quote(watch.stream_id)}`, then replay that range"
        )
    windows = watch.windows
    failed = [_relisted(windows[s], record) for s, record in sorted(watch.failed.items())]
    pending = [windows[s] for s in watch.pending]
    if env.json:
        print_json(
            {
                "stream_id": watch.stream_id,
                "replayed": [bypass_doc(windows[s]) for s in sorted(watch.replayed)],
                "failed": [bypass_doc(b) for b in failed],
                "pending": [bypass_doc(b) for b in pending],
            }
        )
    else:
        out = console()
        out.print(
            f"replayed {len(watch.replayed)} of {len(windows)} windows of {watch.stream_id!r}"
        )
        if failed:
            print_bypasses(out, failed, "failed again (still listed)", commands=False)
        for window in pending:
            out.print(f"no outcome yet: {window_text(window.start_ms, window.end_ms)}")
    if failed or pending:
        _next_steps(watch.stream_id, failed, pending)
        raise typer.Exit(1)


def _next_steps(stream: str, failed: list[BypassView], pending: list[BypassView]) -> None:
    """What to do after a replay that did not replay everything, on stderr (JSON or not)."""
    quoted = shlex.quote(stream)
    err = console(stderr=True)
    if failed:
        from_ms = min(w.start_ms for w in failed)
        to_ms = max(w.end_ms for w in failed)
        err.print(
            f"next: see why with `tidemark streams show {quoted}`; once the cause is fixed, "
            f"replay them again with `tidemark replay {quoted} --from {format_time(from_ms)} "
            f"--to {format_time(to_ms)}`",
            soft_wrap=True,
        )
    if pending:
        err.print(
            "next: the coordinator goes on with the replay; follow it with "
            f"`tidemark streams show {quoted}` (windows replayed leave its bypassed list)",
            soft_wrap=True,
        )


def _relisted(old: BypassView, record: BypassRecord) -> BypassView:
    """The window as relisted after its failed replay (attempts and error as the new record)."""
    error = record.last_error
    return BypassView(
        old.stream_id,
        old.start_ms,
        old.end_ms,
        record.attempts,
        old.first_failed_ms,
        old.bypassed_ms,
        old.last_error if error is None else error.to_wire(),
    )


def _nothing(env: CliEnv, stream: str, from_ms: int, to_ms: int) -> None:
    if env.json:
        print_json({"stream_id": stream, "requested": False, "windows": []})
    else:
        console().print(
            f"nothing to replay: no bypassed window of {stream!r} overlaps "
            f"({format_time(from_ms)}, {format_time(to_ms)}]"
        )


def _requested(env: CliEnv, request: Replay, windows: list[BypassView]) -> None:
    if env.json:
        sent = json.loads(encode_control(request))
        print_json({**sent, "requested": True, "windows": [bypass_doc(w) for w in windows]})
    else:
        console().print(f"replay of {len(windows)} window(s) of {request.stream_id!r} requested")
        for window in windows:
            error = error_text(window.last_error)
            console().print(f"  {window_text(window.start_ms, window.end_ms)}  last error: {error}")
