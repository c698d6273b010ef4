"""The `async-metrics` pipeline: the `metrics` pipeline as a coroutine handler, on aiohttp.

Same params, queries, window semantics, nacks and export as ``streams.pipelines.
prometheus_otlp`` (every decision is that module's; only the HTTP differs), but each task
waits on its queries without holding a thread: one worker keeps hundreds of windows in flight
(``--concurrency``, 100 by default for an async handler), where the threaded pipeline caps at
its threads over the query latency.

aiohttp rather than httpx: it is already installed with Tidemark (Faust's), it is pinned in
constraints.txt, and its connector pools connections per host with a limit (``pool_size``).
Its session belongs to the event loop it was made on, so it is made at the first task, on the
worker's loop, and closed there by ``aclose`` when the worker stops. ``sock_connect`` and
``sock_read`` bound each wait for a connection and for bytes, as the threaded pipeline's
connect and read timeouts do.
"""

from __future__ import annotations

import aiohttp

from streams.errors import InvalidInput
from streams.handler import BAD_PARAMS, EXPORT, Ack, Nack, Outcome, Task
from streams.pipelines.metrics_params import MetricsParamsModel
from streams.pipelines.otlp import MetricSpec, Series
from streams.pipelines.prometheus_otlp import (
    EXPORT_HEADERS,
    Failed,
    check_export,
    export_body,
    in_query_order,
    metric_failed,
    params_for,
    positive_ms,
    query_form,
    query_series,
    query_url,
    snippet,
    timeout_text,
)


class AsyncMetricsPipeline:
    """The ``async-metrics`` handler. One instance serves every task, on one event loop."""

    def __init__(
        self,
        *,
        connect_timeout_ms: int = 3_000,
        read_timeout_ms: int = 10_000,
        pool_size: int = 100,
    ) -> None:
        positive_ms(
            connect_timeout_ms=connect_timeout_ms,
            read_timeout_ms=read_timeout_ms,
            pool_size=pool_size,
        )
        self._timeout_s = (connect_timeout_ms / 1000, read_timeout_ms / 1000)
        self._pool_size = pool_size
        self._session: aiohttp.ClientSession | None = None

    params_model = MetricsParamsModel  # the worker decodes it and calls self(task, model)

    async def __call__(self, task: Task, model: MetricsParamsModel | None = None) -> Outcome:
        try:
            params = params_for(task, model)
        except InvalidInput as exc:
            return Nack(BAD_PARAMS, str(exc))

        results: list[tuple[MetricSpec, list[Series]]] = []
        soft_failures: list[str] = []
        for spec in in_query_order(params.metrics):
            try:
                series = await self._query_range(params.source_url, spec.query, task)
            except Failed as exc:
                if (nack := metric_failed(task, spec, exc, soft_failures)) is not None:
                    return nack
                continue
            results.append((spec, series))

        prepared = export_body(task, params, results, soft_failures)
        if isinstance(prepared, Nack):
            return prepared
        body, last_ms = prepared
        try:
            await self._export(params.export_url, body)
        except Failed as exc:
            return Nack(EXPORT, str(exc))
        return Ack(last_ms)

    async def aclose(self) -> None:
        """Close the pooled connections (on the loop the session was made on)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        """The session, made at the first call: it needs the running loop (no await between
        the check and the assignment, so concurrent first calls share one)."""
        if self._session is None:
            connect_s, read_s = self._timeout_s
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._pool_size),
                timeout=aiohttp.ClientTimeout(sock_connect=connect_s, sock_read=read_s),
            )
        return self._session

    async def _query_range(self, source_url: str, query: str, task: Task) -> list[Series]:
        url, form = query_url(source_url), query_form(query, task)
        try:
            async with self._client().get(url, params=form) as response:
                status, text = response.status, await response.text()
        except TimeoutError as exc:
            raise Failed(f"query timed out ({timeout_text(*self._timeout_s)})") from exc
        except aiohttp.ClientError as exc:
            raise Failed(f"query failed: {snippet(str(exc))}") from exc
        return query_series(status, text, task)

    async def _export(self, export_url: str, body: str) -> None:
        data = body.encode("utf-8")
        try:
            async with self._client().post(export_url, data=data, headers=EXPORT_HEADERS) as r:
                status, text = r.status, await r.text()
        except TimeoutError as exc:
            raise Failed(f"export timed out ({timeout_text(*self._timeout_s)})") from exc
        except aiohttp.ClientError as exc:
            raise Failed(f"export failed: {snippet(str(exc))}") from exc
        check_export(status, text)
