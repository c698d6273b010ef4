"""The `metrics` pipeline: Prometheus ``query_range`` per metric, then one OTLP/HTTP JSON export.

This is the seed's receiver → processor → exporter. For each configured metric it asks a
Prometheus-compatible API (Prometheus, Thanos Query) for the window, turns every sample into
an OTLP gauge data point, sends all of them as one request, and acks with the time of the
last data point found. A failing *core* metric nacks at once; a failing *soft* one is
logged, counted and left out.

Window semantics: a window covers ``start_ms < t <= end_ms``. Prometheus evaluates a range
query at ``start, start + step, …, <= end`` (both ends inclusive), so the query asks for
``[start_ms, end_ms]`` and the point at ``t == start_ms`` is dropped: it belongs to the
previous window, which already reported it as its ``end_ms``. This keeps the evaluation
grid anchored at the window start (so consecutive windows tile it without overlap) and,
unlike querying from ``start_ms + step_ms``, never produces an invalid range when a window
is shorter than a step. Note that Prometheus fills each evaluation step from the most recent
raw sample within its lookback delta (5 minutes by default), so a series whose samples
stopped shortly before ``end_ms`` still yields points up to ``end_ms``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import requests
from prometheus_client import Counter

from streams.errors import InvalidInput
from streams.handler import BAD_PARAMS, CORE_METRIC, EXPORT, NO_DATA, Ack, Nack, Outcome, Task
from streams.params import decode_params
from streams.pipelines.metrics_params import MetricsParamsModel
from streams.pipelines.otlp import STREAM_ID_ATTRIBUTE, MetricSpec, Series, encode_otlp_json

__all__ = ["STREAM_ID_ATTRIBUTE", "MetricSpec", "MetricsPipeline", "Series", "encode_otlp_json"]

log = logging.getLogger(__name__)

SOFT_METRIC_ERRORS: Final = Counter(
    "tidemark_worker_soft_metric_errors_total",
    "Soft metric queries that failed; their windows went on without them.",
    ["metric"],
)

_PLACEHOLDER: Final = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SNIPPET_CHARS: Final = 300


class Failed(Exception):
    """A query or export attempt failed; the message says how. Never leaves the metrics
    pipelines (this module and its async variant): it becomes a nack."""


@dataclass(frozen=True)
class MetricsParams:
    """The task params this pipeline reads, validated."""

    source_url: str
    export_url: str
    metrics: tuple[MetricSpec, ...]
    labels: Mapping[str, str]

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> MetricsParams:
        """Validate ``params``; raises ``InvalidInput`` naming the first bad field."""
        return cls.from_model(decode_params(MetricsParamsModel, params), params)

    @classmethod
    def from_model(cls, model: MetricsParamsModel, params: Mapping[str, Any]) -> MetricsParams:
        """The params decoded (by the worker, once per task) made ready: placeholders filled
        from ``params``, names unique, labels strings; InvalidInput naming the field."""
        metrics = tuple(
            MetricSpec(m.name, fill_placeholders(m.query, params, f"params.metrics[{i}].query"),
                       m.core)
            for i, m in enumerate(model.metrics)
        )  # fmt: skip
        names = [m.name for m in metrics]
        if len(set(names)) != len(names):
            raise InvalidInput("params.metrics", "metric names must be unique")
        if not all(isinstance(v, str) for v in model.labels.values()):
            raise InvalidInput("params.labels", "must be an object of strings")
        return cls(model.source_url, model.export_url, metrics, dict(model.labels))


class MetricsPipeline:
    """The ``metrics`` handler. One instance serves every task; safe to call from threads.

    All HTTP goes through one pooled ``requests.Session`` (its urllib3 pool is thread-safe;
    the session holds no per-request state here). Every call has a connect and a read
    timeout; the read timeout bounds each wait for bytes, not the whole response.
    """

    def __init__(
        self,
        *,
        connect_timeout_ms: int = 3_000,
        read_timeout_ms: int = 10_000,
        pool_size: int = 16,
    ) -> None:
        positive_ms(
            connect_timeout_ms=connect_timeout_ms,
            read_timeout_ms=read_timeout_ms,
            pool_size=pool_size,
        )
        self._timeout_s = (connect_timeout_ms / 1000, read_timeout_ms / 1000)
        self._session = requests.Session()
        adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=pool_size)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)

    params_model = MetricsParamsModel  # the worker decodes it and calls self(task, model)

    def __call__(self, task: Task, model: MetricsParamsModel | None = None) -> Outcome:
        try:
            params = params_for(task, model)
        except InvalidInput as exc:
            return Nack(BAD_PARAMS, str(exc))

        results: list[tuple[MetricSpec, list[Series]]] = []
        soft_failures: list[str] = []
        # Core metrics first, so that a failing one nacks before any time goes to soft ones.
        for spec in in_query_order(params.metrics):
            try:
                results.append((spec, self._query_range(params.source_url, spec.query, task)))
            except Failed as exc:
                if (nack := metric_failed(task, spec, exc, soft_failures)) is not None:
                    return nack

        prepared = export_body(task, params, results, soft_failures)
        if isinstance(prepared, Nack):
            return prepared
        body, last_ms = prepared
        try:
            self._export(params.export_url, body)
        except Failed as exc:
            return Nack(EXPORT, str(exc))
        return Ack(last_ms)

    def close(self) -> None:
        """Release pooled connections."""
        self._session.close()

    def _query_range(self, source_url: str, query: str, task: Task) -> list[Series]:
        try:
            response = self._session.get(
                query_url(source_url), params=query_form(query, task), timeout=self._timeout_s
            )
        except requests.Timeout as exc:
            raise Failed(f"query timed out ({self._timeout_text()}): {snippet(str(exc))}") from exc
        except requests.RequestException as exc:
            raise Failed(f"query failed: {snippet(str(exc))}") from exc
        return query_series(response.status_code, response.text, task)

    def _export(self, export_url: str, body: str) -> None:
        try:
            response = self._session.post(
                export_url,
                data=body.encode("utf-8"),
                headers=EXPORT_HEADERS,
                timeout=self._timeout_s,
            )
        except requests.Timeout as exc:
            raise Failed(f"export timed out ({self._timeout_text()}): {snippet(str(exc))}") from exc
        except requests.RequestException as exc:
            raise Failed(f"export failed: {snippet(str(exc))}") from exc
        check_export(response.status_code, response.text)

    def _timeout_text(self) -> str:
        return timeout_text(*self._timeout_s)


# -- shared by the sync pipeline and the async one (streams.pipelines.prometheus_otlp_async) --

EXPORT_HEADERS: Final = {"Content-Type": "application/json"}


def positive_ms(**values: Any) -> None:
    """Check the pipeline's timeout and pool options; ``InvalidInput`` names the bad one."""
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise InvalidInput(f"options.{name}", "must be a positive integer")


def in_query_order(metrics: Iterable[MetricSpec]) -> list[MetricSpec]:
    """Core metrics first, so that a failing one nacks before any time goes to soft ones."""
    return sorted(metrics, key=lambda m: not m.core)


def metric_failed(
    task: Task, spec: MetricSpec, exc: Failed, soft_failures: list[str]
) -> Nack | None:
    """A core metric's failure nacks the task; a soft one's is counted, logged and noted."""
    if spec.core:
        return Nack(CORE_METRIC, f"metric {spec.name!r}: {exc}")
    SOFT_METRIC_ERRORS.labels(metric=spec.name).inc()
    log.warning("task %s: soft metric %r failed: %s", task.task_id, spec.name, exc)
    soft_failures.append(spec.name)
    return None


def export_body(
    task: Task,
    params: MetricsParams,
    results: Sequence[tuple[MetricSpec, Sequence[Series]]],
    soft_failures: Sequence[str],
) -> Nack | tuple[str, int]:
    """The export's body and the ack's ``ack_ms`` (the last point found), or ``no_data``."""
    last_ms = max((t for _, series in results for s in series for t, _ in s.points), default=None)
    if last_ms is None:
        failed = f" (soft metrics failed: {', '.join(soft_failures)})" if soft_failures else ""
        return Nack(NO_DATA, f"no data point in ({task.start_ms}, {task.end_ms}]{failed}")
    return encode_otlp_json(task.stream_id, params.labels, results), last_ms


def query_url(source_url: str) -> str:
    return source_url.rstrip("/") + "/api/v1/query_range"


def query_form(query: str, task: Task) -> dict[str, str]:
    """The ``query_range`` parameters for the task's window ``[start_ms, end_ms]``."""
    return {
        "query": query,
        "start": _seconds(task.start_ms),
        "end": _seconds(task.end_ms),
        "step": _seconds(task.step_ms),
    }


def query_series(status: int, text: str, task: Task) -> list[Series]:
    """The series of a ``query_range`` answer in the window; ``Failed`` saying what is wrong."""
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise Failed(f"HTTP {status}, not JSON: {snippet(text)}") from exc
    if not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error") if isinstance(body, dict) else None
        kind = body.get("errorType") if isinstance(body, dict) else None
        detail = snippet(str(error)) if error else snippet(text)
        raise Failed(f"HTTP {status}, {kind or 'error'}: {detail}")
    if status != 200:
        raise Failed(f"HTTP {status}: {snippet(text)}")
    return _parse_matrix(body.get("data"), task.start_ms, task.end_ms)


def check_export(status: int, text: str) -> None:
    """``Failed`` unless the export was accepted; a partial success is logged."""
    if not 200 <= status < 300:
        raise Failed(f"export answered HTTP {status}: {snippet(text)}")
    _log_partial_success(text)


def timeout_text(connect_s: float, read_s: float) -> str:
    return f"connect {connect_s:g} s, read {read_s:g} s"


def params_for(task: Task, model: MetricsParamsModel | None) -> MetricsParams:
    """A task's params from the worker's decoded ``model``, or decoded here when the pipeline
    is called without one (a test calling it directly)."""
    if model is None:
        return MetricsParams.from_params(task.params)
    return MetricsParams.from_model(model, task.params)


def fill_placeholders(query: str, params: Mapping[str, Any], field: str) -> str:
    """Replace each ``{name}`` in ``query`` by ``params[name]``.

    Only a bare identifier in braces is a placeholder, so PromQL matchers such as
    ``{job="api"}`` are left alone. Values are inserted as text, unescaped.
    """

    def value_of(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in params:
            raise InvalidInput(field, f"placeholder {{{name}}} has no value in params")
        value = params[name]
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise InvalidInput(f"params.{name}", "a placeholder value must be a string or number")
        return str(value)

    return _PLACEHOLDER.sub(value_of, query)


def _parse_matrix(data: Any, start_ms: int, end_ms: int) -> list[Series]:
    """The series of a ``matrix`` result, keeping only points with ``start_ms < t <= end_ms``."""
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        raise Failed("malformed response: expected data.resultType 'matrix'")
    result = data.get("result")
    if not isinstance(result, list):
        raise Failed("malformed response: data.result is not a list")
    series_list = []
    for raw in result:
        try:
            labels = {str(k): str(v) for k, v in raw["metric"].items()}
            # Timestamps are float seconds with at most millisecond precision.
            points = tuple(
                (t_ms, float(value))
                for t_s, value in raw.get("values", [])
                if start_ms < (t_ms := round(float(t_s) * 1000)) <= end_ms
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise Failed(f"malformed series in response: {exc!r}") from exc
        if points:
            series_list.append(Series(labels, points))
    return series_list


def _log_partial_success(text: str) -> None:
    """OTLP lets a 2xx carry rejected points; retrying would not help, so log and go on."""
    try:
        partial = json.loads(text).get("partialSuccess", {})
    except (ValueError, AttributeError):
        return
    if isinstance(partial, dict) and partial.get("rejectedDataPoints"):
        log.warning(
            "export accepted only part of the points: %s rejected (%s)",
            partial.get("rejectedDataPoints"),
            partial.get("errorMessage", ""),
        )


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.3f}"


def snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SNIPPET_CHARS else text[:_SNIPPET_CHARS] + "…"
