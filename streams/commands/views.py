"""Read-model views as JSON documents and as rich tables, shared by `streams` and `status`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from streams.core.config import DEFAULT_PIPELINE
from streams.humanize import format_duration, format_duration_rounded, format_time
from streams.readview import BypassView, ReadView, bypass_json

STATE_STYLES = {
    "live": "green",
    "catching up": "yellow",
    "retrying": "red",
    "paused": "dim",
    "finished": "blue",
}


def by_lag(views: Iterable[ReadView], now_ms: int) -> list[ReadView]:
    """The most lagging first; streams without a known lag last; ties by stream id."""

    def key(view: ReadView) -> tuple[bool, int, str]:
        lag = view.lag_ms(now_ms)
        return (lag is None, -(lag or 0), view.stream_id)

    return sorted(views, key=key)


def stream_doc(view: ReadView, now_ms: int, config: bool = True) -> dict[str, Any]:
    """A stream for `--output json`: the status page's row of it (streams.readview), its
    window as a `[start_ms, end_ms]` pair, and its config unless `config` is False."""
    return view.to_json(now_ms, config=config, window_pair=True)


def bypass_doc(view: BypassView) -> dict[str, Any]:
    """A bypassed window for `--output json`, as the status page shows it."""
    return bypass_json(view)


def time_text(ms: int | None) -> str:
    return "-" if ms is None else format_time(ms)


def window_text(start_ms: int, end_ms: int) -> str:
    return f"{format_time(start_ms)} .. {format_time(end_ms)}"


def lag_text(lag_ms: int | None) -> str:
    return "-" if lag_ms is None else format_duration_rounded(lag_ms)


def state_text(
    state: str,
    waiting_since_ms: int | None = None,
    live_in_ms: int | None = None,
    catch_up_rate: float | None = None,
    held_since_ms: int | None = None,
    now_ms: int | None = None,
) -> Text:
    """The state; for a stream catching up, when it is live again at its measured pace (or that
    it does not gain); "waiting for its source" while a due window waits for admission; "held
    since 10:04:05Z" while the outage guard holds a window's bypass (the state stays one of
    streams.core.view's: a held window is retrying)."""
    text = Text(state, style=STATE_STYLES.get(state, ""))
    if held_since_ms is not None and state not in ("paused", "finished"):
        text.append(f", held since {held_since_text(held_since_ms, now_ms)}", style="yellow")
    if state == "catching up" and catch_up_rate is not None:
        if live_in_ms is None:
            text.append(", not gaining", style="red")
        else:
            text.append(f", live in ~{format_duration(max(live_in_ms, 1000), parts=1)}")
    if waiting_since_ms is not None and state not in ("paused", "finished"):
        text.append(", waiting for its source", style="yellow")
    return text


def view_state_text(view: ReadView, now_ms: int) -> Text:
    return state_text(
        view.state(now_ms),
        view.waiting_since_ms,
        view.live_in_ms(now_ms),
        view.catch_up_rate,
        view.held_since_ms,
        now_ms,
    )


def held_since_text(since_ms: int, now_ms: int | None) -> str:
    """`10:04:05Z` within a day of `now_ms`, else the full time (UTC both)."""
    full = format_time(since_ms - since_ms % 1000)
    if now_ms is not None and 0 <= now_ms - since_ms < 86_400_000:
        return full.split("T", 1)[1]
    return full


def error_text(error: Mapping[str, str] | None) -> str:
    if not error:
        return "-"
    return f"{error.get('kind', '?')}: {error.get('message', '')}".rstrip(": ")


def streams_table(views: Iterable[ReadView], now_ms: int, title: str | None = None) -> Table:
    """stream, pipeline, downstream (UTC), lag, state, attempt, bypasses: one row per stream."""
    table = Table(title=title, title_justify="left")
    table.add_column("stream", overflow="fold")
    table.add_column("pipeline", overflow="fold")
    table.add_column("downstream (UTC)", no_wrap=True)
    table.add_column("lag", justify="right", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("attempt", justify="right")
    table.add_column("bypasses", justify="right")
    for view in views:
        table.add_row(
            view.stream_id,
            view.pipeline,
            time_text(view.downstream_ms),
            lag_text(view.lag_ms(now_ms)),
            view_state_text(view, now_ms),
            str(view.attempt),
            str(view.bypasses),
        )
    return table


def print_bypasses(
    out: Console, views: Iterable[BypassView], title: str, commands: bool = True
) -> None:
    """Bypassed windows with their last error, then the command that replays each.

    The commands come on lines of their own, never wrapped, so that they can be copied.
    """
    listed = list(views)
    out.print(bypass_table(listed, title))
    if commands and listed:
        out.print("replay with:")
        for view in listed:
            out.print(f"  {view.replay_command()}", soft_wrap=True)


def bypass_table(listed: Iterable[BypassView], title: str | None = None) -> Table:
    """Bypassed windows: stream, window, attempts, when, last error."""
    table = Table(title=title, title_justify="left")
    table.add_column("stream", overflow="fold")
    table.add_column("window (UTC)", overflow="fold")
    table.add_column("attempts", justify="right")
    table.add_column("bypassed at", no_wrap=True)
    table.add_column("last error", overflow="fold")
    for view in listed:
        table.add_row(
            view.stream_id,
            window_text(view.start_ms, view.end_ms),
            str(view.attempts),
            format_time(view.bypassed_ms),
            error_text(view.last_error),
        )
    return table


def retry_text(retry: Mapping[str, Any]) -> str:
    """A retry policy in `--retry` syntax: immediate, fixed:1m, exponential:1s,2.0,5m,0.1."""
    strategy = retry.get("strategy")
    if strategy == "fixed":
        return f"fixed:{format_duration(int(retry['interval_ms']))}"
    if strategy == "exponential":
        initial, top = format_duration(int(retry["initial_ms"])), format_duration(retry["max_ms"])
        return f"exponential:{initial},{retry['multiplier']:g},{top},{retry['jitter']:g}"
    return str(strategy)


def config_rows(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A config as (flag, value) pairs, in the syntax `streams create` accepts."""
    params = config.get("params") or {}
    return [
        ("--start", format_time(int(config["start_ms"]))),
        ("--window", format_duration(int(config["window_ms"]))),
        ("--step", format_duration(int(config["step_ms"]))),
        ("--delay", format_duration(int(config["delay_ms"]))),
        ("--timeout", format_duration(int(config["task_timeout_ms"]))),
        ("--bypass-after", format_duration(int(config["bypass_after_ms"]))),
        ("--retry", retry_text(config["retry"])),
        ("--max-attempts", str(config.get("max_attempts") or "no limit")),
        ("--non-retryable", ", ".join(config.get("non_retryable") or []) or "-"),
        ("--max-in-flight", str(config["max_in_flight"])),
        ("--source", str(config.get("source") or "-")),
        ("--pipeline", str(config.get("pipeline") or DEFAULT_PIPELINE)),
        ("--param", " ".join(f"{k}={json.dumps(v)}" for k, v in sorted(params.items())) or "-"),
    ]


def print_stream(out: Console, view: ReadView, bypasses: Iterable[BypassView], now_ms: int) -> None:
    """Everything `streams show` prints about one stream."""
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column(overflow="fold")
    window = view.window
    rows = [
        ("stream", Text(view.stream_id)),
        ("pipeline", Text(view.pipeline)),
        ("state", view_state_text(view, now_ms)),
        ("downstream", Text(time_text(view.downstream_ms))),
        ("lag", Text(lag_text(view.lag_ms(now_ms)))),
        ("last commit", Text(time_text(view.last_commit_ms))),
        ("current window", Text("-" if window is None else window_text(*window))),
        ("attempt", Text(str(view.attempt))),
        ("last error", Text(error_text(view.last_error))),
        ("bypassed windows", Text(str(view.bypasses))),
    ]
    for name, fact in rows:
        facts.add_row(name, fact)
    out.print(facts)
    if view.config is not None:
        config = Table(title="config", title_justify="left", show_header=False)
        config.add_column(style="bold")
        config.add_column(overflow="fold")
        for flag, value in config_rows(view.config):
            config.add_row(flag, value)
        out.print(config)
    listed = list(bypasses)
    if listed:
        print_bypasses(out, listed, "bypassed windows")
