"""The pipeline registry's pure rules: decoding, liveness by age, and params against a schema."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from streams.errors import InvalidInput
from streams.params import params_schema
from streams.registry import MIN_STALE_MS, check_stream_params, is_live, pipelines
from streams.topics import Topics
from streams.wire.pipelines import (
    PipelineMessage,
    decode_pipeline,
    encode_pipeline,
    pipeline_key,
)


class Metric(BaseModel):
    name: str = Field(min_length=1)
    query: str
    core: bool = False


class Params(BaseModel):
    source_url: str
    metrics: list[Metric] = Field(min_length=1)
    step: int = Field(default=1, ge=1)
    mode: str | None = None


class Typed:
    params_model = Params


def entry(worker: str = "w1", published_ms: int = 1_000, route: str = "logs", **kw: Any) -> Any:
    fields: dict[str, Any] = {
        "route": route,
        "handler": "windowlog:WindowLog",
        "version": "1.2",
        "params_schema": params_schema(Typed()),
        "worker": worker,
        "group": f"tidemark-workers-{route}",
        "published_ms": published_ms,
        "interval_ms": 2_000,
        **kw,
    }
    return PipelineMessage(**fields)


def test_an_entry_round_trips_under_its_key_and_a_tombstone_is_none() -> None:
    e = entry()
    key = pipeline_key("logs", "w1")
    assert decode_pipeline(key, encode_pipeline(e)) == e
    assert decode_pipeline(key, None) is None


def test_an_entry_under_another_key_or_with_a_bad_field_is_refused_naming_it() -> None:
    with pytest.raises(InvalidInput) as wrong_key:
        decode_pipeline(b"logs/w2", encode_pipeline(entry()))
    assert wrong_key.value.field == "key"
    raw = encode_pipeline(entry()).replace(b'"interval_ms":2000', b'"interval_ms":0')
    with pytest.raises(InvalidInput) as bad:
        decode_pipeline(pipeline_key("logs", "w1"), raw)
    assert bad.value.field == "interval_ms"


def test_an_entry_is_live_for_three_intervals_and_at_least_the_minimum() -> None:
    e = entry(published_ms=100_000)  # interval 2 s: 3 intervals < the minimum
    assert is_live(e, 100_000 + MIN_STALE_MS - 1)
    assert not is_live(e, 100_000 + MIN_STALE_MS)
    slow = entry(published_ms=100_000, interval_ms=20_000)
    assert is_live(slow, 100_000 + 59_999)
    assert not is_live(slow, 100_000 + 60_000)


def test_pipelines_groups_live_workers_and_the_streams_each_serves() -> None:
    entries = [entry("w1", 50_000), entry("w2", 1_000), entry("m1", 50_000, route="metrics")]
    found = pipelines(entries, 55_000, {"s1": "logs", "s2": "metrics", "s3": "orphan"})
    assert sorted(found) == ["logs", "metrics", "orphan"]
    assert [e.worker for e in found["logs"].live] == ["w1"]
    assert [e.worker for e in found["logs"].entries] == ["w2", "w1"]
    assert found["logs"].streams == ("s1",)
    assert found["orphan"].live == () and found["orphan"].streams == ("s3",)
    assert found["logs"].versions == ["1.2"]


def _check(params: dict[str, Any], now_ms: int = 2_000) -> Any:
    info = pipelines([entry()], now_ms).get("logs")
    return check_stream_params(info, "logs", params)


GOOD = {"source_url": "http://x", "metrics": [{"name": "up", "query": "up"}]}


def test_good_params_are_checked_without_a_warning() -> None:
    check = _check(GOOD)
    assert check.checked and check.warnings == []


@pytest.mark.parametrize(
    ("params", "field", "words"),
    [
        ({"metrics": GOOD["metrics"]}, "params.source_url", "required"),
        ({**GOOD, "source_url": 3}, "params.source_url", "must be a string"),
        ({**GOOD, "metrics": []}, "params.metrics", "at least 1"),
        ({**GOOD, "metrics": [{"name": "up"}]}, "params.metrics[0].query", "required"),
        ({**GOOD, "metrics": [{"name": "", "query": "q"}]}, "params.metrics[0].name", "at least"),
        ({**GOOD, "metrics": [{"name": "a", "query": "q", "core": 1}]}, "params.metrics[0].core",
         "boolean"),
        ({**GOOD, "step": 0}, "params.step", "at least 1"),
        ({**GOOD, "step": True}, "params.step", "integer"),
        ({**GOOD, "mode": 5}, "params.mode", "string"),
    ],
)  # fmt: skip
def test_bad_params_are_refused_naming_the_field(
    params: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        _check(params)
    assert refused.value.field == field
    assert words in refused.value.reason


def test_an_unknown_param_is_refused_when_the_model_forbids_extras() -> None:
    class Strict(BaseModel, extra="forbid"):
        path: str

    class StrictHandler:
        params_model = Strict

    info = pipelines([entry(params_schema=params_schema(StrictHandler()))], 2_000)["logs"]
    with pytest.raises(InvalidInput) as refused:
        check_stream_params(info, "logs", {"path": "/x", "pth": "/y"})
    assert refused.value.field == "params.pth"


def test_no_live_worker_warns_but_still_checks_against_the_last_schema() -> None:
    check = _check(GOOD, now_ms=2_000 + 10 * MIN_STALE_MS)
    assert check.checked
    assert any("no live worker" in w for w in check.warnings)
    with pytest.raises(InvalidInput):
        _check({}, now_ms=2_000 + 10 * MIN_STALE_MS)


def test_an_unannounced_pipeline_is_not_checked_and_says_so() -> None:
    check = check_stream_params(None, "logs", {"anything": 1})
    assert not check.checked
    assert "not checked" in check.warnings[0]


def test_a_pipeline_without_a_schema_is_not_checked_and_says_so() -> None:
    info = pipelines([entry(params_schema=None)], 2_000)["logs"]
    check = check_stream_params(info, "logs", {"anything": 1})
    assert not check.checked and "declares no params schema" in check.warnings[0]


def test_workers_of_two_versions_must_both_accept_the_params() -> None:
    class V2(BaseModel):
        source_url: str
        metrics: list[Metric]
        region: str

    class H2:
        params_model = V2

    entries = [entry("w1"), entry("w2", version="2.0", params_schema=params_schema(H2()))]
    info = pipelines(entries, 2_000)["logs"]
    with pytest.raises(InvalidInput) as refused:
        check_stream_params(info, "logs", GOOD)
    assert refused.value.field == "params.region"


def test_the_pipelines_topic_is_compacted_and_made_with_the_others() -> None:
    topics = Topics("p")
    assert topics.pipelines == "p.pipelines"
    spec = next(s for s in topics.specs(6) if s.name == "p.pipelines")
    assert spec.partitions == 1 and spec.config["cleanup.policy"] == "compact"
