"""What a reader holds of the cluster: one view of a stream and one of a bypassed window, and
their JSON, rendered here once for both the CLI (`--output json`) and the status page's API.

A `ReadView` is made from the `PublishedView` the coordinator publishes on `streams`
(streams.core.view) when a reader asks; the status page's table keeps it as its row. Its
state is kept in a form that time does not change: a fixed state (paused, retrying, finished),
or the time `behind_after_ms` at which a live stream turns catching up, so that the table can
sort and count by state at any `now_ms` without asking every stream again
(streams.core.view.status_at is the rule).
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from streams.core import config_to_dict
from streams.core._checks import MAX_ERROR_MESSAGE_CHARS
from streams.core.config import DEFAULT_PIPELINE, StreamConfig
from streams.core.eta import live_at_ms
from streams.core.view import STATUSES, PublishedView, behind_ms
from streams.humanize import format_time

STATES: tuple[str, ...] = STATUSES
FIXED_STATES = ("paused", "retrying", "finished")  # held until the next view
MAX_MESSAGE_CHARS = MAX_ERROR_MESSAGE_CHARS  # an error message's bound, on the wire and in JSON


def error_json(error: Mapping[str, str] | None) -> dict[str, str] | None:
    """An error's kind and message only, the message cut to `MAX_MESSAGE_CHARS` (the wire
    already cuts them there: only a view made by other means is ever cut)."""
    if not error:
        return None
    kind, message = str(error.get("kind", "")), str(error.get("message", ""))
    return {"kind": kind, "message": message[:MAX_MESSAGE_CHARS]}


def behind_after(status: str, downstream_ms: int, window_ms: int, delay_ms: int) -> int | None:
    """When a stream published with `status` turns catching up if no view comes meanwhile;
    None when its state does not change with time (paused, retrying, finished)."""
    if status in FIXED_STATES:
        return None
    return downstream_ms + behind_ms(window_ms, delay_ms)


class StreamSource(Protocol):
    """What a `ReadView` can be copied from besides a published view (the tests' fakes)."""

    @property
    def stream_id(self) -> str: ...
    @property
    def paused(self) -> bool: ...
    @property
    def downstream_ms(self) -> int | None: ...
    @property
    def last_commit_ms(self) -> int | None: ...
    @property
    def window(self) -> tuple[int, int] | None: ...
    @property
    def attempt(self) -> int: ...
    @property
    def last_error(self) -> Mapping[str, str] | None: ...
    @property
    def bypasses(self) -> int: ...
    @property
    def pipeline(self) -> str: ...
    def state(self, now_ms: int) -> str: ...
    def catching_up_after_ms(self) -> int | None: ...


@dataclass(slots=True)
class ReadView:
    """One stream as a reader holds it: made fresh for each reader, so safe to keep and change.

    `status` is as published; `behind_after_ms` when a live stream turns catching up (None:
    the state is `status` whatever the time). `bypasses` counts its windows listed on
    `bypassed` (replayable), `bypassed_total` every window bypassed since its creation, as the
    coordinator counts; `held_since_ms` when the outage guard began holding an outstanding
    window's bypass (None: none is held).

    `stream_config` is the published config, None in a view made without it: the status
    page's (its params may hold secrets, and the page shows none) and copies of other kinds of
    view. Such a view has no `config` attribute at all; in the others `config` becomes a dict
    only when first asked (about 25 µs a view, which the status page's refresh of every changed
    stream does not pay).
    """

    stream_id: str
    status: str
    behind_after_ms: int | None
    downstream_ms: int | None
    last_commit_ms: int | None = None
    window: tuple[int, int] | None = None
    attempt: int = 0
    last_error: dict[str, str] | None = None
    bypasses: int = 0
    bypassed_total: int = 0
    incarnation: int = 0
    changed_ms: int | None = None
    held_since_ms: int | None = None
    stream_config: StreamConfig | None = field(default=None, repr=False)
    # Shown even where the config is not (the status page): which workers run the stream.
    pipeline: str = DEFAULT_PIPELINE
    # Since when a due window waits for its source's admission (None: none waits).
    waiting_since_ms: int | None = None
    # Progress ms per wall ms while behind, as the reader measured it over its views
    # (streams.core.eta; None: not behind, or not measured yet).
    catch_up_rate: float | None = None
    _config: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, view: PublishedView, bypasses: int, *, config: bool = True) -> ReadView:
        """The view of `view` with `bypasses` of its windows listed on `bypassed`; without its
        config unless `config`."""
        stream_config, error = view.config, view.last_error
        return cls(
            stream_config.stream_id,
            view.status,
            behind_after(
                view.status, view.downstream_ms, stream_config.window_ms, stream_config.delay_ms
            ),
            view.downstream_ms,
            view.committed_ms,
            view.window,
            view.attempt,
            None if error is None else error.to_wire(),
            bypasses,
            view.bypasses,
            view.incarnation,
            view.changed_ms,
            view.held_since_ms,
            stream_config if config else None,
            stream_config.pipeline,
            view.waiting_since_ms,
        )

    @classmethod
    def copy_of(cls, source: StreamSource, now_ms: int) -> ReadView:
        """`source` if it is a ReadView (the read model makes one per reader: nothing else
        holds it), else a copy of it, without config, its state as it is at `now_ms`."""
        if isinstance(source, ReadView):
            return source
        after = source.catching_up_after_ms()
        error = source.last_error
        return cls(
            source.stream_id,
            source.state(now_ms) if after is None else "live",
            after,
            source.downstream_ms,
            source.last_commit_ms,
            source.window,
            source.attempt,
            None if error is None else dict(error),
            source.bypasses,
            pipeline=source.pipeline,
        )

    @property
    def config(self) -> dict[str, Any]:
        """The stream's config as a dict of its own, made on first use, then kept.

        AttributeError in a view made without its config (so `hasattr` tells them apart).
        """
        if self._config is None:
            self._config = self.config_dict()
        return self._config

    def config_dict(self) -> dict[str, Any]:
        """A fresh copy of the published config (AttributeError in a view made without it)."""
        if self.stream_config is None:
            raise AttributeError(f"the view of {self.stream_id!r} was made without its config")
        config = config_to_dict(self.stream_config)
        if config["params"]:  # nested values are shared with the decoded view's: copied
            config["params"] = copy.deepcopy(config["params"])
        return config

    @property
    def paused(self) -> bool:
        return self.status == "paused"

    @property
    def fixed_state(self) -> str | None:
        """The state when time does not change it; None for live or catching up."""
        return self.status if self.behind_after_ms is None else None

    def lag_ms(self, now_ms: int) -> int | None:
        """How far progress is behind `now_ms` (None: no progress known)."""
        return None if self.downstream_ms is None else now_ms - self.downstream_ms

    def state(self, now_ms: int) -> str:
        """`paused`, `retrying` and `finished` as published; else `catching up` once `now_ms`
        is past `behind_after_ms` (2 * window_ms + delay_ms behind), or `live`."""
        if self.behind_after_ms is None:
            return self.status
        return "catching up" if now_ms > self.behind_after_ms else "live"

    def catching_up_after_ms(self) -> int | None:
        return self.behind_after_ms

    def live_in_ms(self, now_ms: int) -> int | None:
        """How long until a stream catching up is live again at its measured pace (None: it is
        not catching up, its pace is not measured yet, or it does not gain on the clock)."""
        rate, changed_ms, after_ms = self.catch_up_rate, self.changed_ms, self.behind_after_ms
        if rate is None or changed_ms is None or after_ms is None:
            return None
        if self.state(now_ms) != "catching up":
            return None
        live_ms = live_at_ms(changed_ms, after_ms, rate)
        return None if live_ms is None else max(0, live_ms - now_ms)

    def to_json(
        self, now_ms: int, *, config: bool = False, window_pair: bool = False
    ) -> dict[str, Any]:
        """The stream as JSON at `now_ms`: the status page's row and the CLI's document.

        `config` adds a copy of the config (the CLI's `streams show`; never the page: params
        may hold secrets). `window_pair` renders the window as `[start_ms, end_ms]`, the CLI's
        shape since its first release, where the API has `{"start_ms", "end_ms"}`.
        """
        doc: dict[str, Any] = {
            "stream_id": self.stream_id,
            "state": self.state(now_ms),
            "lag_ms": self.lag_ms(now_ms),
            "downstream_ms": self.downstream_ms,
            "last_commit_ms": self.last_commit_ms,
            "window": _window_json(self.window, window_pair),
            "attempt": self.attempt,
            "last_error": error_json(self.last_error),
            "bypasses": self.bypasses,
            "paused": self.paused,
            "pipeline": self.pipeline,
        }
        if self.waiting_since_ms is not None:
            doc["waiting_since_ms"] = self.waiting_since_ms
        if self.catch_up_rate is not None and doc["state"] == "catching up":
            doc["catch_up_rate"] = round(self.catch_up_rate, 3)
            doc["live_in_ms"] = self.live_in_ms(now_ms)  # None: not gaining on the clock
        if config:
            doc["config"] = self.config_dict()
        return doc


def _window_json(window: tuple[int, int] | None, pair: bool) -> Any:
    if window is None:
        return None
    return list(window) if pair else {"start_ms": window[0], "end_ms": window[1]}


@dataclass(frozen=True)
class BypassView:
    """A window the coordinator gave up on, still listed on `bypassed` (so replayable)."""

    stream_id: str
    start_ms: int
    end_ms: int
    attempts: int
    first_failed_ms: int
    bypassed_ms: int
    last_error: dict[str, str] | None

    def replay_command(self) -> str:
        """The CLI command that replays exactly this window."""
        return (
            f"tidemark replay {shlex.quote(self.stream_id)} "
            f"--from {format_time(self.start_ms)} --to {format_time(self.end_ms)}"
        )


class BypassSource(Protocol):
    """What a bypass's JSON is rendered from: a `BypassView` (or a test's fake)."""

    @property
    def stream_id(self) -> str: ...
    @property
    def start_ms(self) -> int: ...
    @property
    def end_ms(self) -> int: ...
    @property
    def attempts(self) -> int: ...
    @property
    def first_failed_ms(self) -> int: ...
    @property
    def bypassed_ms(self) -> int: ...
    @property
    def last_error(self) -> Mapping[str, str] | None: ...
    def replay_command(self) -> str: ...


def bypass_json(view: BypassSource) -> dict[str, Any]:
    """A bypassed window as JSON, with the command that replays it: the CLI's and the page's."""
    return {
        "stream_id": view.stream_id,
        "start_ms": view.start_ms,
        "end_ms": view.end_ms,
        "attempts": view.attempts,
        "first_failed_ms": view.first_failed_ms,
        "bypassed_ms": view.bypassed_ms,
        "last_error": error_json(view.last_error),
        "replay_command": view.replay_command(),
    }


__all__ = [
    "MAX_MESSAGE_CHARS",
    "STATES",
    "BypassSource",
    "BypassView",
    "ReadView",
    "StreamSource",
    "behind_after",
    "bypass_json",
    "error_json",
]
