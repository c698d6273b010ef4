"""The typed params of the `metrics` pipelines (sync and async): the model the worker decodes
once per task (streams.params) and whose JSON Schema the registry announces, so that
`tidemark streams create` refuses a typo before a worker ever sees it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, StrictBool

_URL = r"^https?://"


class MetricModel(BaseModel):
    """One metric: its OTLP name, its PromQL and whether a failure nacks the window (core)."""

    name: str = Field(min_length=1, description="the exported metric's name, unique per stream")
    query: str = Field(
        min_length=1, description="PromQL; each {name} is replaced by the param of that name"
    )
    core: StrictBool = Field(default=False, description="a failing core metric nacks the window")


class MetricsParamsModel(BaseModel, extra="allow"):
    """A `metrics` stream's params. Other params are allowed: they fill the queries'
    placeholders (``{cluster_id}``)."""

    source_url: str = Field(pattern=_URL, description="the Prometheus-compatible query API")
    export_url: str = Field(pattern=_URL, description="the OTLP/HTTP JSON metrics endpoint")
    metrics: list[MetricModel] = Field(min_length=1)
    # Checked as strings by MetricsParams.from_model, which names the field as it always has.
    labels: dict[str, Any] = Field(
        default_factory=dict,
        description="resource attributes added to every export",
        json_schema_extra={"additionalProperties": {"type": "string"}},
    )
