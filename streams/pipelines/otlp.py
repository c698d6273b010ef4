"""The OTLP side of the metrics pipelines: a query's series, and their OTLP/HTTP JSON export."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

# protobuf ships no type hints (and types-protobuf is not a project dependency).
from google.protobuf import json_format  # type: ignore[import-untyped]
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

import streams

STREAM_ID_ATTRIBUTE: Final = "tidemark.stream_id"


@dataclass(frozen=True)
class MetricSpec:
    """One metric to fetch: its OTLP name, its PromQL (placeholders filled), core or soft."""

    name: str
    query: str
    core: bool


@dataclass(frozen=True)
class Series:
    """One series of a query result: its labels and its ``(t_ms, value)`` points in the window."""

    labels: Mapping[str, str]
    points: tuple[tuple[int, float], ...]


def encode_otlp_json(
    stream_id: str,
    labels: Mapping[str, str],
    results: Iterable[tuple[MetricSpec, Sequence[Series]]],
) -> str:
    """One ``ExportMetricsServiceRequest`` in the OTLP/JSON encoding, with one gauge per metric.

    Resource attributes are ``labels`` plus ``tidemark.stream_id`` (which wins over a label
    of that name). Each sample becomes a data point whose attributes are its Prometheus
    labels, less ``__name__``: in OTLP the metric's name says that. Field names are
    lowerCamelCase and 64-bit integers strings, as the OTLP/JSON rules require.
    """
    request = ExportMetricsServiceRequest()
    resource_metrics = request.resource_metrics.add()
    _set_attributes(
        resource_metrics.resource.attributes, {**labels, STREAM_ID_ATTRIBUTE: stream_id}
    )
    scope_metrics = resource_metrics.scope_metrics.add()
    scope_metrics.scope.name = "tidemark"
    scope_metrics.scope.version = streams.__version__
    for spec, series_list in results:
        if not any(s.points for s in series_list):
            continue
        metric = scope_metrics.metrics.add()
        metric.name = spec.name
        for series in series_list:
            attributes = {k: v for k, v in series.labels.items() if k != "__name__"}
            for t_ms, value in series.points:
                point = metric.gauge.data_points.add()
                point.time_unix_nano = t_ms * 1_000_000
                point.as_double = value
                _set_attributes(point.attributes, attributes)
    return str(json_format.MessageToJson(request, indent=None, use_integers_for_enums=True))


def _set_attributes(target: Any, attributes: Mapping[str, str]) -> None:
    for key in sorted(attributes):
        target.append(KeyValue(key=key, value=AnyValue(string_value=attributes[key])))
