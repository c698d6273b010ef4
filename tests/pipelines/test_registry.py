"""The pipeline registry: names to handlers, with clear errors for unknown names and options."""

from __future__ import annotations

import pytest

from streams.errors import InvalidInput
from streams.handler import handler_kind
from streams.pipelines import build_pipeline
from streams.pipelines.prometheus_otlp import MetricsPipeline
from streams.pipelines.prometheus_otlp_async import AsyncMetricsPipeline
from streams.pipelines.synthetic import SyntheticPipeline
from streams.worker.api import Ack
from tests.pipelines.conftest import make_task


def test_builds_each_pipeline_with_its_options() -> None:
    metrics = build_pipeline("metrics", read_timeout_ms=2_000)
    synthetic = build_pipeline("synthetic", latency_ms=0)

    assert isinstance(metrics, MetricsPipeline)
    metrics.close()
    assert isinstance(synthetic, SyntheticPipeline)
    assert synthetic(make_task(0, 60_000, {})) == Ack(60_000)


def test_the_async_metrics_pipeline_is_built_with_the_same_options() -> None:
    handler = build_pipeline("async-metrics", read_timeout_ms="2000", pool_size=50)
    assert isinstance(handler, AsyncMetricsPipeline)
    assert handler_kind(handler) == "coroutine"
    with pytest.raises(InvalidInput) as caught:
        build_pipeline("async-metrics", connect_timeout_ms=0)
    assert caught.value.field == "options.connect_timeout_ms"


def test_an_unknown_pipeline_names_the_known_ones() -> None:
    with pytest.raises(InvalidInput) as caught:
        build_pipeline("nope")

    assert caught.value.field == "pipeline"
    assert "metrics, synthetic" in caught.value.reason


def test_an_unknown_option_is_rejected() -> None:
    with pytest.raises(InvalidInput) as caught:
        build_pipeline("metrics", timeout=3)

    assert caught.value.field == "options.timeout"


def test_an_invalid_option_value_is_rejected() -> None:
    with pytest.raises(InvalidInput) as caught:
        build_pipeline("metrics", connect_timeout_ms=0)

    assert caught.value.field == "options.connect_timeout_ms"
