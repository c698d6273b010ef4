"""The pipelines a worker can run, by name: ``build_pipeline("metrics")`` and so on.

A pipeline is a factory of handlers (see ``streams.handler``), sync or ``async``: its keyword
options are the worker's settings (timeouts, latency), checked against its signature before it
is called (``streams.pipelines.options``), while each task's ``params`` say what to do.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any, Final

from streams.errors import InvalidInput
from streams.handler import AnyHandler
from streams.pipelines.options import checked_options, factory_options
from streams.pipelines.prometheus_otlp import MetricsPipeline
from streams.pipelines.prometheus_otlp_async import AsyncMetricsPipeline
from streams.pipelines.synthetic import SyntheticPipeline

PIPELINES: Final[dict[str, Callable[..., AnyHandler]]] = {
    "metrics": MetricsPipeline,
    "async-metrics": AsyncMetricsPipeline,
    "synthetic": SyntheticPipeline,
}


def _import_factory(name: str) -> Callable[..., AnyHandler]:
    """``"package.module:attribute"``: a user's own pipeline factory (a class or function)."""
    module_name, _, attribute = name.partition(":")
    if "" not in sys.path:  # like `python -m`: a module in the working directory is found
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidInput("pipeline", f"cannot import {module_name!r}: {exc}") from exc
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise InvalidInput("pipeline", f"{module_name!r} has no callable {attribute!r}")
    return factory  # type: ignore[no-any-return]


def build_pipeline(name: str, **options: Any) -> AnyHandler:
    """A handler for pipeline ``name``; raises ``InvalidInput`` for an unknown name, and for an
    unknown, missing or ill-typed option (naming it: ``options.<name>``).

    ``name`` is a built-in pipeline ("metrics", "synthetic") or ``"module:factory"``, whose
    factory is called with the options and returns the handler. Options given as text (the
    command line's ``--option key=value``) become what the factory's annotations ask for.
    """
    factory = _import_factory(name) if ":" in name else PIPELINES.get(name)
    if factory is None:
        known = ", ".join(sorted(PIPELINES))
        raise InvalidInput("pipeline", f"unknown pipeline {name!r}; known: {known}")
    checked = checked_options(name, factory_options(factory), options)
    handler = factory(**checked)
    if not callable(handler):
        kind = type(handler).__name__
        raise InvalidInput("pipeline", f"{name!r} made a {kind}, not a handler (a callable)")
    return handler
