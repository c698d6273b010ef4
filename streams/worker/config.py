"""A worker's settings: one validated, frozen object, with the topic and group names it implies."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from streams.core.config import DEFAULT_PIPELINE, check_pipeline
from streams.errors import InvalidInput
from streams.handler import HandlerKind
from streams.topics import Topics

DEFAULT_TOPIC_PREFIX: Final = "tidemark"
TOPIC_PREFIX_ENV: Final = "TIDEMARK_TOPIC_PREFIX"
SESSION_TIMEOUT_ENV: Final = "TIDEMARK_SESSION_TIMEOUT_MS"
# Handler calls at once when the config does not say: threads for a sync handler, tasks on the
# asyncio loop for a coroutine handler, which waits on I/O without holding a thread.
DEFAULT_CONCURRENCY: Final[dict[HandlerKind, int]] = {"thread": 4, "coroutine": 100}
_NAME: Final = re.compile(r"[A-Za-z0-9._-]+")
_PIPELINE: Final = re.compile(r"[A-Za-z0-9._-]+(:[A-Za-z0-9_.]+)?")  # a name, or module:factory


def topic_prefix_from_env(environ: Mapping[str, str] | None = None) -> str:
    """``TIDEMARK_TOPIC_PREFIX``, or ``tidemark``."""
    env = os.environ if environ is None else environ
    return env.get(TOPIC_PREFIX_ENV) or DEFAULT_TOPIC_PREFIX


def session_timeout_from_env(environ: Mapping[str, str] | None = None) -> int:
    """``TIDEMARK_SESSION_TIMEOUT_MS`` (as the coordinator reads it), or 10000."""
    env = os.environ if environ is None else environ
    raw = env.get(SESSION_TIMEOUT_ENV) or "10000"
    try:
        return int(raw)
    except ValueError:
        raise InvalidInput(SESSION_TIMEOUT_ENV, f"must be an integer, got {raw!r}") from None


@dataclass(frozen=True)
class WorkerConfig:
    """What one worker process runs, and how.

    ``concurrency`` is how many handler calls run at once: threads for a sync handler, tasks on
    one asyncio loop for a coroutine handler (None: ``DEFAULT_CONCURRENCY`` for the kind, 4 or
    100). ``buffer`` is how many tasks may wait, fetched, beyond the ``concurrency`` running ones:
    enough that handlers never wait for a fetch (fetching pauses when it is full and resumes
    once half of it has drained: twice the concurrency by default), small enough that a stopped
    worker returns little work (its waiting tasks go back as `shutdown` nacks, out again at
    once). ``grace_s`` is how long a shutdown waits for running tasks. After ``max_task_s`` a
    running handler gets no more heartbeats, so that a hung one cannot hold its window forever:
    the coordinator times the attempt out and retries (or bypasses) it; a coroutine handler,
    which can be cancelled, is cancelled then and its task nacked ``timeout`` at once.
    ``session_timeout_ms`` is how soon the group gives a dead worker's partitions to others
    (the brokers' minimum is 6 s by default; the coordinator uses 10 s as well). ``instance_id``
    makes the worker a static group member (``group.instance.id``): restarted with the same id,
    it takes its partitions back without a rebalance, but a stop does not hand them over before
    the session times out.
    """

    pipeline: str
    topic_prefix: str = DEFAULT_TOPIC_PREFIX
    group_id: str | None = None
    concurrency: int | None = None
    buffer: int | None = None
    grace_s: float = 10.0
    flush_timeout_s: float = 10.0
    poll_interval_s: float = 0.05
    instance_id: str | None = None
    session_timeout_ms: int = 10_000
    max_task_s: float = 600.0
    # The pipeline whose streams this worker serves (`streams create --pipeline`), not the
    # handler it runs: one handler may serve two pipelines under two names (two Prometheus
    # servers, say), and a worker started as before serves the default one, on the topic and in
    # the group it always had, so that an upgrade strands no stream (README, "Pipelines").
    route: str = DEFAULT_PIPELINE

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.topic_prefix):
            raise InvalidInput("topic_prefix", "must be letters, digits, '.', '_' or '-'")
        if not _PIPELINE.fullmatch(self.pipeline):
            raise InvalidInput("pipeline", "must be a pipeline name, or module:factory")
        try:
            check_pipeline(self.route)
        except InvalidInput as exc:
            raise InvalidInput("route", exc.reason) from None
        if self.group_id is not None and not self.group_id:
            raise InvalidInput("group_id", "must not be empty")
        if self.concurrency is not None and self.concurrency < 1:
            raise InvalidInput("concurrency", "must be at least 1")
        if self.buffer is not None and self.buffer < 0:
            raise InvalidInput("buffer", "must not be negative")
        for name in ("grace_s", "flush_timeout_s"):
            if getattr(self, name) < 0:
                raise InvalidInput(name, "must not be negative")
        if self.max_task_s <= 0:
            raise InvalidInput("max_task_s", "must be positive")
        if self.session_timeout_ms < 1:
            raise InvalidInput("session_timeout_ms", "must be positive")
        if self.poll_interval_s <= 0:
            raise InvalidInput("poll_interval_s", "must be positive")

    def concurrency_for(self, kind: HandlerKind) -> int:
        """Handler calls at once for a handler of this kind."""
        return DEFAULT_CONCURRENCY[kind] if self.concurrency is None else self.concurrency

    def buffer_for(self, kind: HandlerKind) -> int:
        """Tasks fetched beyond the running ones: ``buffer``, or twice the concurrency."""
        return 2 * self.concurrency_for(kind) if self.buffer is None else self.buffer

    @property
    def tasks_topic(self) -> str:
        """The tasks of the pipeline it serves: only those (streams.topics)."""
        return Topics(self.topic_prefix).tasks_for(self.route)

    @property
    def results_topic(self) -> str:
        return Topics(self.topic_prefix).results

    @property
    def group(self) -> str:
        """The consumer group: ``group_id``, or ``{prefix}-workers-{route}`` for a pipeline
        named by ``route``; serving the default pipeline, ``{prefix}-workers-{pipeline}`` as
        before pipelines existed, so that an upgraded worker resumes at its group's offsets
        (a new group would start at the earliest task kept and run them all again)."""
        if self.group_id:
            return self.group_id
        name = self.pipeline if self.route == DEFAULT_PIPELINE else self.route
        return f"{self.topic_prefix}-workers-{name}"
