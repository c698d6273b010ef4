"""The status page's pipelines: the registry (streams.registry) and each pipeline's lag, as
`tidemark pipelines list --output json` shows them, read at most every `every_ms` (the lag costs
a few requests per group; the registry changes every few seconds at most)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from streams.errors import BrokerUnavailable
from streams.kafka.compacted import LatestEntries
from streams.kafka.registry import pipeline_lags
from streams.kafka.settings import KafkaSettings
from streams.registry import pipeline_doc, pipelines
from streams.topics import Topics
from streams.wire import decode_pipeline

log = logging.getLogger(__name__)

EVERY_MS = 10_000


class PipelinesReader:
    """Reads the `pipelines` topic on where it stopped; `docs` renders each pipeline."""

    def __init__(self, settings: KafkaSettings, topics: Topics, every_ms: int = EVERY_MS) -> None:
        self.every_ms = every_ms
        self._settings = settings
        self._topics = topics
        self._entries = LatestEntries(settings, topics.pipelines, decode_pipeline)
        self._docs: list[dict[str, Any]] = []
        self._read_ms: int | None = None

    def docs(
        self, now_ms: int, streams: Callable[[], Mapping[str, str]], timeout_s: float = 5.0
    ) -> list[dict[str, Any]]:
        """Each pipeline's doc (streams.registry.pipeline_doc); `streams` maps each stream to
        its pipeline. Read again once `every_ms` has passed, else the last docs."""
        last = self._read_ms
        if last is not None and 0 <= now_ms - last < self.every_ms:
            return self._docs
        self._read_ms = now_ms
        found = pipelines(self._entries.read(timeout_s).values(), now_ms, streams())
        try:
            lags = pipeline_lags(self._settings, self._topics, found.values(), timeout_s)
        except BrokerUnavailable as exc:  # the rest is still worth showing
            log.info("dashboard: pipelines' lag unknown: %s", exc)
            lags = {}
        self._docs = [
            pipeline_doc(info, self._topics.tasks_for(name), lags.get(name), now_ms)
            for name, info in found.items()
        ]
        return self._docs

    def close(self) -> None:
        self._entries.close()
