"""The pipelines a worker can run, by name: ``build_pipeline("metrics")`` and so on.

A pipeline is a factory of handlers (see ``streams.worker.api``): its keyword options are
the worker's settings (timeouts, latency), while each task's ``params`` say what to do.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Final

from streams.errors import InvalidInput
from streams.pipelines.metrics import MetricsPipeline
from streams.pipelines.synthetic import SyntheticPipeline
from streams.worker.api import Handler

PIPELINES: Final[dict[str, Callable[..., Handler]]] = {
    "metrics": MetricsPipeline,
    "synthetic": SyntheticPipeline,
}


def build_pipeline(name: str, **options: Any) -> Handler:
    """A handler for pipeline ``name``; raises ``InvalidInput`` for an unknown name or option."""
    factory = PIPELINES.get(name)
    if factory is None:
        known = ", ".join(sorted(PIPELINES))
        raise InvalidInput("pipeline", f"unknown pipeline {name!r}; known: {known}")
    accepted = inspect.signature(factory).parameters
    for option in options:
        if option not in accepted:
            known = ", ".join(accepted)
            raise InvalidInput(
                f"options.{option}", f"unknown option for pipeline {name!r}; known: {known}"
            )
    return factory(**options)
