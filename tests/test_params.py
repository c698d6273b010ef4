"""Typed params: a handler's pydantic model, decoded once per task by the worker's own call path."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from streams.errors import InvalidInput
from streams.handler import Ack, Outcome, Task
from streams.params import decode_params, params_schema, with_typed_params
from streams.testing import assert_ack, assert_nack, make_task, run_handler
from streams.testing.worker import InProcessWorker


class Params(BaseModel):
    path: str
    batch: int = Field(default=10, ge=1)


class SyncTyped:
    params_model = Params

    def __init__(self) -> None:
        self.seen: list[Params] = []
        self.closed = False

    def __call__(self, task: Task, params: Params) -> Outcome:
        self.seen.append(params)
        return Ack(task.end_ms)

    def close(self) -> None:
        self.closed = True


class AsyncTyped:
    params_model = Params

    def __init__(self) -> None:
        self.seen: list[Params] = []

    async def __call__(self, task: Task, params: Params) -> Outcome:
        self.seen.append(params)
        return Ack(task.end_ms)


def test_decode_names_the_first_bad_field() -> None:
    assert decode_params(Params, {"path": "/x"}) == Params(path="/x", batch=10)
    with pytest.raises(InvalidInput) as missing:
        decode_params(Params, {})
    assert missing.value.field == "params.path"
    with pytest.raises(InvalidInput) as low:
        decode_params(Params, {"path": "/x", "batch": 0})
    assert low.value.field == "params.batch"


@pytest.mark.parametrize("kind", [SyncTyped, AsyncTyped])
def test_the_handler_gets_its_params_decoded(kind: Any) -> None:
    handler = kind()
    task = make_task(params={"path": "/x", "batch": 3})
    assert_ack(run_handler(handler, task), ack_ms=task.end_ms)
    assert handler.seen == [Params(path="/x", batch=3)]


@pytest.mark.parametrize("kind", [SyncTyped, AsyncTyped])
def test_params_the_model_refuses_are_a_bad_params_nack_and_the_handler_is_not_called(
    kind: Any,
) -> None:
    handler = kind()
    outcome = run_handler(handler, make_task(params={"batch": "many"}))
    assert_nack(outcome, kind="bad_params")
    assert "params.path" in outcome.message  # type: ignore[union-attr]
    assert handler.seen == []


def test_a_handler_without_a_model_is_called_as_it_was() -> None:
    def plain(task: Task) -> Outcome:
        return Ack(task.end_ms)

    assert with_typed_params(plain) is plain
    assert params_schema(plain) is None


def test_the_wrapper_keeps_the_kind_and_the_close() -> None:
    handler = SyncTyped()
    wrapped: Any = with_typed_params(handler)
    wrapped.close()
    assert handler.closed
    assert params_schema(handler) == Params.model_json_schema()


def test_the_in_process_worker_hands_typed_params() -> None:
    handler = SyncTyped()
    worker = InProcessWorker(handler)
    worker.give(make_task(params={"path": "/y"}))
    worker.work()
    assert [r["outcome"] for r in worker.results()] == ["ack"]
    assert handler.seen == [Params(path="/y")]
    worker.stop()


def test_the_metrics_pipelines_announce_a_schema_that_names_a_bad_metric() -> None:
    from streams.params_schema import check_params
    from streams.pipelines.prometheus_otlp import MetricsPipeline
    from streams.pipelines.prometheus_otlp_async import AsyncMetricsPipeline

    good = {
        "source_url": "http://prom:9090",
        "export_url": "http://otel:4318/v1/metrics",
        "metrics": [{"name": "up", "query": "up{cluster='{cluster_id}'}"}],
        "cluster_id": "c1",  # a placeholder's value: extra params are allowed
    }
    pipeline = MetricsPipeline()
    schema = params_schema(pipeline)
    assert schema is not None and schema == params_schema(AsyncMetricsPipeline())
    check_params(schema, good)
    with pytest.raises(InvalidInput) as refused:
        check_params(schema, {**good, "metrics": [{"name": "up", "qeury": "up"}]})
    assert refused.value.field == "params.metrics[0].query"
    with pytest.raises(InvalidInput) as labels:
        check_params(schema, {**good, "labels": {"env": 1}})
    assert labels.value.field == "params.labels.env"
    # The worker's decode of the same params: a typed handler gets the model.
    outcome = run_handler(pipeline, make_task(params={**good, "metrics": []}))
    assert_nack(outcome, kind="bad_params", message="params.metrics:")
    pipeline.close()
