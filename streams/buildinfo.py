"""`tidemark_build_info`: which release a process runs, a gauge of 1 labelled with its version
(the installed distribution's, ``tidemark`` in pyproject.toml) and, for a coordinator, its
engine. Rules join on it to say what version an alerting process runs."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

DISTRIBUTION = "tidemark"
UNKNOWN = "unknown"


def version() -> str:
    """The installed distribution's version; ``unknown`` when it is not installed (a bare
    source tree on PYTHONPATH)."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN


class BuildInfoCollector:
    """``tidemark_build_info`` = 1 with ``version`` and the given labels (``engine``)."""

    def __init__(self, **labels: str) -> None:
        self._labels = {"version": version(), **labels}

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            "tidemark_build_info", "The running release: always 1.", labels=list(self._labels)
        )
        family.add_metric(list(self._labels.values()), 1)
        return [family]
