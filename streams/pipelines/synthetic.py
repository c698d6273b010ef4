"""A synthetic pipeline for demos and benchmarks: no external service, controllable failures.

It sleeps ``latency_ms``, then acks the whole window (``ack_ms = end_ms``) unless

- its outage switch is on: the file ``outage_file`` exists, or the task's params say
  ``outage_until_ms`` and that time has not come yet. It nacks ``outage``.
- the task draws a failure: ``failure_probability`` compared with a number derived from the
  ``task_id`` hash, so a given task always fails or always succeeds (reproducible tests and
  demos), while its retry, which has a new ``task_id``, draws again. It nacks
  ``synthetic_failure``.

Each setting is a build option and can be overridden per stream by a task param of the same
name (``latency_ms``, ``failure_probability``; ``outage_until_ms`` is a param only).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from streams import clock
from streams.errors import InvalidInput
from streams.handler import BAD_PARAMS, OUTAGE, SYNTHETIC_FAILURE, Ack, Nack, Outcome, Task


def draw(task_id: str) -> float:
    """A number in ``[0, 1)`` fixed by ``task_id``: the first 8 bytes of its SHA-256."""
    digest = hashlib.sha256(task_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class SyntheticPipeline:
    """The ``synthetic`` handler. Time and sleeping are injectable so that tests need no waits."""

    def __init__(
        self,
        *,
        latency_ms: int = 0,
        failure_probability: float = 0.0,
        outage_file: str | os.PathLike[str] | None = None,
        now_ms: Callable[[], int] = clock.now_ms,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._latency_ms = _latency_ms(latency_ms, "options.latency_ms")
        self._failure_probability = _probability(failure_probability, "options.failure_probability")
        self._outage_file = outage_file
        self._now_ms = now_ms
        self._sleep = sleep

    def __call__(self, task: Task) -> Outcome:
        try:
            latency_ms, probability, outage_until_ms = self._settings(task.params)
        except InvalidInput as exc:
            return Nack(BAD_PARAMS, str(exc))
        if latency_ms:
            self._sleep(latency_ms / 1000)
        if self._outage_file is not None and os.path.exists(self._outage_file):
            return Nack(OUTAGE, f"outage switch is on ({os.fspath(self._outage_file)} exists)")
        if outage_until_ms is not None and self._now_ms() < outage_until_ms:
            return Nack(OUTAGE, f"outage until {outage_until_ms}")
        if draw(task.task_id) < probability:
            return Nack(SYNTHETIC_FAILURE, f"drawn failure (probability {probability:g})")
        return Ack(task.end_ms)

    def _settings(self, params: Mapping[str, Any]) -> tuple[int, float, int | None]:
        latency_ms = self._latency_ms
        if "latency_ms" in params:
            latency_ms = _latency_ms(params["latency_ms"], "params.latency_ms")
        probability = self._failure_probability
        if "failure_probability" in params:
            probability = _probability(params["failure_probability"], "params.failure_probability")
        outage_until_ms = params.get("outage_until_ms")
        if outage_until_ms is not None and (
            not isinstance(outage_until_ms, int) or isinstance(outage_until_ms, bool)
        ):
            raise InvalidInput("params.outage_until_ms", "must be an integer (epoch ms)")
        return latency_ms, probability, outage_until_ms


def _latency_ms(value: Any, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidInput(field, "must be a non-negative integer")
    return value


def _probability(value: Any, field: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
        raise InvalidInput(field, "must be a number between 0 and 1")
    return float(value)
