"""The metrics pipeline against a real Prometheus and an OTLP receiver that parses every payload.

Each test of a pipeline runs twice (the ``pipeline`` fixture): on the threaded ``metrics``
pipeline (requests) and on ``async-metrics`` (aiohttp), which must decide the same.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from prometheus_client import REGISTRY

from streams.dev.broker import free_port
from streams.errors import InvalidInput
from streams.pipelines.prometheus_otlp import (
    MetricSpec,
    MetricsPipeline,
    Series,
    encode_otlp_json,
    fill_placeholders,
)
from streams.worker.api import Ack, Nack
from tests.pipelines.conftest import (
    EMPTY_OFFSET_MS,
    STREAM_ID,
    Data,
    make_task,
    metrics_pipeline,
)
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.prometheus import PrometheusServer

A = {"name": "a", "query": 'tm_a{cluster="{cluster_id}"}', "core": True}
B = {"name": "b", "query": 'tm_b{cluster="{cluster_id}"}', "core": True}
C = {"name": "c", "query": 'tm_c{cluster="{cluster_id}"}', "core": False}
BROKEN = 'tm_a{cluster="c1"'  # the server rejects it: unclosed braces


def params(source_url: str, export_url: str, *metrics: dict[str, Any]) -> dict[str, Any]:
    return {
        "source_url": source_url,
        "export_url": export_url,
        "metrics": list(metrics),
        "labels": {"env": "test", "region": "eu-1"},
        "cluster_id": "c1",
    }


def attributes(pairs: Any) -> dict[str, str]:
    return {kv.key: kv.value.string_value for kv in pairs}


def points(request: ExportMetricsServiceRequest) -> dict[str, list[tuple[int, float, str]]]:
    """Metric name -> sorted (time ms, value, node) of its gauge points."""
    (resource_metrics,) = request.resource_metrics
    (scope_metrics,) = resource_metrics.scope_metrics
    return {
        metric.name: sorted(
            (p.time_unix_nano // 1_000_000, p.as_double, attributes(p.attributes)["node"])
            for p in metric.gauge.data_points
        )
        for metric in scope_metrics.metrics
    }


def soft_errors(metric: str) -> float:
    value = REGISTRY.get_sample_value(
        "tidemark_worker_soft_metric_errors_total", {"metric": metric}
    )
    return value or 0.0


def test_example_a_acks_at_the_window_end_with_one_valid_export(
    prometheus: PrometheusServer, receiver: OtlpReceiver, pipeline: MetricsPipeline, data: Data
) -> None:
    start_ms, end_ms = data.window()
    task = make_task(start_ms, end_ms, params(prometheus.url, receiver.url, A, B, C))

    assert pipeline(task) == Ack(end_ms)

    (request,) = receiver.requests()
    assert receiver.errors == []
    (resource_metrics,) = request.resource_metrics
    assert attributes(resource_metrics.resource.attributes) == {
        "env": "test",
        "region": "eu-1",
        "tidemark.stream_id": STREAM_ID,
    }
    s = 1_000
    # The sample at exactly start_ms belongs to the previous window; cluster c2 is filtered out
    # by the filled {cluster_id} placeholder.
    assert points(request) == {
        "a": [(start_ms + k * s, float(k), "n1") for k in (15, 30, 45)],
        "b": sorted(
            (start_ms + k * s, k + 0.5, node) for k in (15, 30, 45, 60) for node in ("n1", "n2")
        ),
        "c": [(start_ms + k * s, float(k), "n1") for k in (15, 30)],
    }
    point = resource_metrics.scope_metrics[0].metrics[0].gauge.data_points[0]
    assert attributes(point.attributes) == {"cluster": "c1", "node": "n1"}  # no __name__


def test_export_uses_the_otlp_json_encoding(
    prometheus: PrometheusServer, receiver: OtlpReceiver, pipeline: MetricsPipeline, data: Data
) -> None:
    start_ms, end_ms = data.window()
    assert pipeline(make_task(start_ms, end_ms, params(prometheus.url, receiver.url, A))) == Ack(
        start_ms + 45_000
    )

    (body,) = receiver.bodies()
    scope = body["resourceMetrics"][0]["scopeMetrics"][0]
    assert scope["scope"]["name"] == "tidemark"
    point = scope["metrics"][0]["gauge"]["dataPoints"][0]
    # OTLP/JSON: lowerCamelCase names, 64-bit integers as decimal strings.
    assert point["timeUnixNano"] == str((start_ms + 15_000) * 1_000_000)
    assert point["asDouble"] == 15.0


def test_ack_is_the_last_data_point_across_metrics(
    prometheus: PrometheusServer, receiver: OtlpReceiver, pipeline: MetricsPipeline, data: Data
) -> None:
    start_ms, end_ms = data.window()
    task = make_task(start_ms, end_ms, params(prometheus.url, receiver.url, A, C))

    assert pipeline(task) == Ack(start_ms + 45_000)  # a partial ack: (:45, :60] is still to do


def test_example_c_a_rejected_core_query_nacks_and_exports_nothing(
    prometheus: PrometheusServer, receiver: OtlpReceiver, pipeline: MetricsPipeline, data: Data
) -> None:
    start_ms, end_ms = data.window()
    broken = {"name": "broken", "query": BROKEN, "core": True}
    task = make_task(start_ms, end_ms, params(prometheus.url, receiver.url, C, A, broken))

    outcome = pipeline(task)

    assert isinstance(outcome, Nack)
    assert outcome.kind == "core_metric"
    assert "broken" in outcome.message and "bad_data" in outcome.message
    assert receiver.attempts == 0


def test_a_failing_soft_metric_is_counted_and_the_window_still_acks(
    prometheus: PrometheusServer, receiver: OtlpReceiver, pipeline: MetricsPipeline, data: Data
) -> None:
    start_ms, end_ms = data.window()
    flaky = {"name": "flaky", "query": BROKEN, "core": False}
    before = soft_errors("flaky")

    outcome = pipeline(make_task(start_ms, end_ms, params(prometheus.url, receiver.url, A, flaky)))

    assert outcome == Ack(start_ms + 45_000)
    assert soft_errors("flaky") == before + 1
    (request,) = receiver.requests()
    assert set(points(request)) == {"a"}


def test_an_empty_window_nacks_no_data(
    prometheus: PrometheusServer, receiver: OtlpReceiver, pipeline: MetricsPipeline, data: Data
) -> None:
    start_ms, end_ms = data.window(EMPTY_OFFSET_MS)

    outcome = pipeline(make_task(start_ms, end_ms, params(prometheus.url, receiver.url, A, B, C)))

    assert isinstance(outcome, Nack)
    assert outcome.kind == "no_data"
    assert receiver.attempts == 0


def test_a_failing_receiver_nacks_export(
    prometheus: PrometheusServer, receiver: OtlpReceiver, pipeline: MetricsPipeline, data: Data
) -> None:
    receiver.fail_status = 503
    start_ms, end_ms = data.window()

    outcome = pipeline(make_task(start_ms, end_ms, params(prometheus.url, receiver.url, A)))

    assert isinstance(outcome, Nack)
    assert outcome.kind == "export"
    assert "503" in outcome.message
    assert receiver.attempts == 1


def test_an_unreachable_export_url_nacks_export(
    prometheus: PrometheusServer, pipeline: MetricsPipeline, data: Data
) -> None:
    start_ms, end_ms = data.window()
    nowhere = f"http://127.0.0.1:{free_port()}/v1/metrics"
    began = time.monotonic()

    outcome = pipeline(make_task(start_ms, end_ms, params(prometheus.url, nowhere, A)))

    assert time.monotonic() - began < 3
    assert isinstance(outcome, Nack)
    assert outcome.kind == "export"
    assert "export failed" in outcome.message


def test_a_stalled_receiver_nacks_export_within_the_read_timeout(
    prometheus: PrometheusServer, receiver: OtlpReceiver, data: Data, pipeline_kind: str
) -> None:
    receiver.stall_s = 10
    fast = metrics_pipeline(pipeline_kind, connect_timeout_ms=500, read_timeout_ms=300)
    start_ms, end_ms = data.window()
    began = time.monotonic()
    try:
        outcome = fast(make_task(start_ms, end_ms, params(prometheus.url, receiver.url, A)))
    finally:
        fast.close()

    assert time.monotonic() - began < 3
    assert isinstance(outcome, Nack)
    assert outcome.kind == "export"
    assert "timed out" in outcome.message


def test_a_missing_placeholder_nacks_bad_params(
    prometheus: PrometheusServer, receiver: OtlpReceiver, pipeline: MetricsPipeline, data: Data
) -> None:
    start_ms, end_ms = data.window()
    task_params = params(prometheus.url, receiver.url, A)
    del task_params["cluster_id"]

    outcome = pipeline(make_task(start_ms, end_ms, task_params))

    assert outcome == Nack(
        "bad_params", "params.metrics[0].query: placeholder {cluster_id} has no value in params"
    )
    assert receiver.attempts == 0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"metrics": []}, "params.metrics"),
        ({"metrics": [{"name": "a", "query": "up", "core": "yes"}]}, "params.metrics[0].core"),
        ({"source_url": "prometheus:9090"}, "params.source_url"),
        ({"export_url": None}, "params.export_url"),
        ({"labels": {"env": 1}}, "params.labels"),
        ({"metrics": [A, A]}, "params.metrics"),
    ],
)
def test_invalid_params_nack_bad_params_naming_the_field(
    pipeline: MetricsPipeline, change: dict[str, Any], field: str
) -> None:
    task_params = params("http://127.0.0.1:1", "http://127.0.0.1:1/v1/metrics", A) | change

    outcome = pipeline(make_task(0, 60_000, task_params))

    assert isinstance(outcome, Nack)
    assert outcome.kind == "bad_params"
    assert outcome.message.startswith(f"{field}: ")


def test_a_stopped_source_nacks_core_metric_until_it_is_back(
    own_prometheus: PrometheusServer, receiver: OtlpReceiver, pipeline: MetricsPipeline, data: Data
) -> None:
    start_ms, end_ms = data.window()
    task = make_task(start_ms, end_ms, params(own_prometheus.url, receiver.url, A, B))

    own_prometheus.stop()
    down = pipeline(task)
    own_prometheus.start()
    back = pipeline(task)

    assert isinstance(down, Nack)
    assert down.kind == "core_metric"
    assert back == Ack(end_ms)
    assert len(receiver.requests()) == 1


def test_placeholders_leave_promql_matchers_alone() -> None:
    query = 'sum by (node) (rate(x{cluster="{cluster_id}", job=~"a|b"}[{range}]))'

    filled = fill_placeholders(query, {"cluster_id": "c1", "range": "5m"}, "q")

    assert filled == 'sum by (node) (rate(x{cluster="c1", job=~"a|b"}[5m]))'


def test_a_placeholder_value_must_be_a_string_or_number() -> None:
    with pytest.raises(InvalidInput) as caught:
        fill_placeholders("x{a={v}}", {"v": ["list"]}, "q")

    assert caught.value.field == "params.v"


def test_the_encoding_keeps_every_sample_and_the_stream_id() -> None:
    series = Series({"__name__": "x", "node": "n1"}, ((1_000, 1.5), (2_000, float("nan"))))
    body = encode_otlp_json(
        "s1", {"tidemark.stream_id": "spoofed"}, [(MetricSpec("x", "x", True), [series])]
    )

    request = json_format.Parse(body, ExportMetricsServiceRequest())
    (resource_metrics,) = request.resource_metrics
    assert list(resource_metrics.resource.attributes) == [
        KeyValue(key="tidemark.stream_id", value=AnyValue(string_value="s1"))
    ]
    (metric,) = resource_metrics.scope_metrics[0].metrics
    assert [p.time_unix_nano for p in metric.gauge.data_points] == [10**9, 2 * 10**9]
    assert attributes(metric.gauge.data_points[0].attributes) == {"node": "n1"}
