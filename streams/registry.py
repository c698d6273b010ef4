"""The pipeline registry as its readers see it: which workers serve which pipeline, and whether
a stream's params fit the schema its workers announced (pure: time is an argument).

Each worker republishes its entry on the compacted `{prefix}.pipelines` topic every
`interval_ms` (streams.worker.registry) and writes a tombstone when it stops cleanly, as the
coordinators' `health` entries do. A worker that died without a tombstone leaves its last entry
behind: an entry is live while younger than `stale_after_ms`, three of its own intervals (one
lost or late publish is no death), and never less than MIN_STALE_MS. Ages are the publisher's
wall clock against the reader's: keep the hosts' clocks in step (NTP).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from streams.params_schema import check_params
from streams.wire.pipelines import PipelineMessage

MIN_STALE_MS: Final = 10_000
STALE_INTERVALS: Final = 3


def stale_after_ms(entry: PipelineMessage) -> int:
    """How old an entry may be and still count as a live worker."""
    return max(MIN_STALE_MS, STALE_INTERVALS * entry.interval_ms)


def is_live(entry: PipelineMessage, now_ms: int) -> bool:
    """Whether the worker that published `entry` is live at `now_ms`."""
    return now_ms - entry.published_ms < stale_after_ms(entry)


@dataclass(frozen=True)
class PipelineInfo:
    """One pipeline as the registry shows it: its live workers, and every entry it holds."""

    name: str
    live: tuple[PipelineMessage, ...]
    entries: tuple[PipelineMessage, ...]
    streams: tuple[str, ...] = ()

    @property
    def versions(self) -> list[str]:
        return sorted({e.version for e in self.live})

    @property
    def groups(self) -> list[str]:
        return sorted({e.group for e in self.live or self.entries})

    def schemas(self) -> list[dict[str, Any]]:
        """The distinct params schemas of the live workers (else of the newest entry): a stream
        must suit every worker that may get its tasks, old version or new, during a rollout."""
        chosen = self.live or self.entries[-1:]
        distinct: list[dict[str, Any]] = []
        for entry in chosen:
            if entry.params_schema is not None and entry.params_schema not in distinct:
                distinct.append(entry.params_schema)
        return distinct

    @property
    def declares_params(self) -> bool:
        return any(e.params_schema is not None for e in self.live or self.entries[-1:])


def pipelines(
    entries: Iterable[PipelineMessage],
    now_ms: int,
    streams: Mapping[str, str] | None = None,
) -> dict[str, PipelineInfo]:
    """Every pipeline that an entry or a stream names, by name; `streams` maps a stream id to
    its pipeline. Entries are kept oldest first."""
    by_route: dict[str, list[PipelineMessage]] = {}
    for entry in sorted(entries, key=lambda e: (e.published_ms, e.worker)):
        by_route.setdefault(entry.route, []).append(entry)
    served: dict[str, list[str]] = {}
    for stream_id, pipeline in sorted((streams or {}).items()):
        served.setdefault(pipeline, []).append(stream_id)
    return {
        name: PipelineInfo(
            name,
            tuple(e for e in by_route.get(name, []) if is_live(e, now_ms)),
            tuple(by_route.get(name, [])),
            tuple(served.get(name, [])),
        )
        for name in sorted(set(by_route) | set(served))
    }


@dataclass(frozen=True)
class ParamsCheck:
    """What `check_stream_params` found: whether the params were checked, and what to warn."""

    checked: bool
    warnings: list[str] = field(default_factory=list)


def check_stream_params(
    info: PipelineInfo | None, pipeline: str, params: Mapping[str, Any]
) -> ParamsCheck:
    """Check a stream's `params` against what `pipeline`'s workers announced (`info`, None if
    none ever did): raises InvalidInput naming the field when a schema refuses them; warns,
    never fails, when no live worker serves the pipeline or nothing could be checked."""
    warnings = []
    if info is None or not info.entries:
        warnings.append(
            f"no worker has announced pipeline {pipeline!r}: its params are not checked "
            "(workers before the pipeline registry announce nothing)"
        )
        return ParamsCheck(False, warnings)
    if not info.live:
        warnings.append(
            f"no live worker serves pipeline {pipeline!r}: its windows wait until one starts"
        )
    if not info.declares_params:
        warnings.append(f"pipeline {pipeline!r} declares no params schema: params not checked")
        return ParamsCheck(False, warnings)
    for schema in info.schemas():
        check_params(schema, params)
    return ParamsCheck(True, warnings)


def pipeline_doc(
    info: PipelineInfo, tasks_topic: str, lag: int | None, now_ms: int
) -> dict[str, Any]:
    """One pipeline as `tidemark pipelines list --output json` and the status page show it;
    `lag` is its workers' consumer lag on `tasks_topic` (None: not known)."""
    return {
        "pipeline": info.name,
        "tasks_topic": tasks_topic,
        "live_workers": [
            {
                "worker": e.worker,
                "handler": e.handler,
                "version": e.version,
                "group": e.group,
                "age_ms": max(0, now_ms - e.published_ms),
            }
            for e in info.live
        ],
        "versions": info.versions,
        "groups": info.groups,
        "params_schema": bool(info.declares_params),
        "lag": lag,
        "streams": list(info.streams),
    }
