"""A worker announces the pipeline it serves in the registry (streams.registry) while it runs.

At start it publishes its entry (route, handler, version, the params schema of its handler's
model, its identity and group), then again every `interval_ms` from a thread of its own, so that
readers can tell a live worker from a dead one by the entry's age, and at a clean stop a
tombstone. A worker that dies leaves its entry to go stale. A publish that fails is logged and
retried at the next interval: the registry is advice for the CLI, and a worker that cannot
announce still serves its tasks.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import streams
from streams import clock
from streams.errors import TidemarkError
from streams.params import params_schema
from streams.wire.pipelines import PipelineMessage, encode_pipeline, pipeline_key
from streams.worker.config import WorkerConfig

log = logging.getLogger("streams.worker")

DEFAULT_INTERVAL_MS: Final = 5_000
Publish = Callable[[bytes, bytes | None], None]


def worker_identity(config: WorkerConfig) -> str:
    """The worker's static member id if it has one, else host, process and a random part (a
    process restarted with the same pid is a new worker)."""
    if config.instance_id:
        return config.instance_id
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def handler_version(handler: object) -> str:
    """The handler's ``version`` attribute if it is text, else Tidemark's own version."""
    version = getattr(handler, "version", None)
    return version if isinstance(version, str) else f"tidemark {streams.__version__}"


@dataclass(frozen=True)
class Announcement:
    """What a worker announces; `entry(now_ms)` is its registry entry at that time."""

    route: str
    handler: str
    version: str
    params_schema: dict[str, Any] | None
    worker: str
    group: str
    interval_ms: int = DEFAULT_INTERVAL_MS

    @classmethod
    def of(
        cls, config: WorkerConfig, handler: object, interval_ms: int = DEFAULT_INTERVAL_MS
    ) -> Announcement:
        return cls(
            config.route,
            config.pipeline,
            handler_version(handler),
            params_schema(handler),
            worker_identity(config),
            config.group,
            interval_ms,
        )

    @property
    def key(self) -> bytes:
        return pipeline_key(self.route, self.worker)

    def entry(self, now_ms: int) -> PipelineMessage:
        return PipelineMessage(
            route=self.route,
            handler=self.handler,
            version=self.version,
            params_schema=self.params_schema,
            worker=self.worker,
            group=self.group,
            published_ms=now_ms,
            interval_ms=self.interval_ms,
        )


class RegistryAnnouncer:
    """Publishes `announcement` now and every interval on a thread; `stop(clean)` ends it, with
    a tombstone when the worker stops cleanly."""

    def __init__(
        self,
        announcement: Announcement,
        publish: Publish,
        now_ms: Callable[[], int] = clock.now_ms,
    ) -> None:
        self.announcement = announcement
        self._publish = publish
        self._now_ms = now_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.published = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="worker-registry", daemon=True)
        self._thread.start()

    def announce(self) -> bool:
        """Publish the entry once; False (logged) if the broker did not take it."""
        entry = self.announcement.entry(self._now_ms())
        try:
            self._publish(self.announcement.key, encode_pipeline(entry))
        except TidemarkError as exc:
            log.warning("could not announce pipeline %r: %s", self.announcement.route, exc)
            return False
        self.published += 1
        return True

    def _run(self) -> None:
        interval_s = self.announcement.interval_ms / 1000
        while True:
            self.announce()
            if self._stop.wait(interval_s):
                return

    def stop(self, clean: bool = True) -> None:
        """Stop announcing; at a clean stop, withdraw the entry (a tombstone)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(15)
        if not clean:
            return
        try:
            self._publish(self.announcement.key, None)
        except TidemarkError as exc:
            log.warning("could not withdraw from the registry (goes stale): %s", exc)
