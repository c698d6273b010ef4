"""A pipeline's build options (``--option key=value``): read from its factory's signature,
converted from text as annotated, and refused by name when unknown, missing or ill-typed.
Internal hooks (``now_ms``, ``sleep``) are not options."""

from __future__ import annotations

import asyncio
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import pytest

from streams.errors import InvalidInput
from streams.handler import Ack, Outcome, Task, handler_kind
from streams.pipelines import build_pipeline
from streams.pipelines.synthetic import SyntheticPipeline
from streams.worker.cli import main, parse_options

HERE = "tests.pipelines.test_options"


class Echo:
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    def __call__(self, task: Task) -> Outcome:
        return Ack(task.end_ms)


def with_keywords(**options: Any) -> Echo:
    """A factory that takes any keyword option and checks them itself."""
    return Echo(options)


def typed(
    *,
    cluster: str,
    limit: int = 5,
    ratio: float = 0.5,
    verbose: bool = False,
    mode: Literal["fast", "slow"] = "fast",
    path: Path | None = None,
) -> Echo:
    """A factory with a required option and typed ones."""
    return Echo(
        {"cluster": cluster, "limit": limit, "ratio": ratio, "verbose": verbose, "mode": mode}
        | {"path": path}
    )


def not_a_handler() -> int:
    return 42


async def _answer(task: Task) -> Outcome:
    await asyncio.sleep(0)
    return Ack(task.end_ms)


def async_factory(*, delay_ms: int = 0) -> Any:
    return _answer


def refused(name: str, **options: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        build_pipeline(name, **options)
    return caught.value


def test_an_unknown_option_lists_the_options_not_the_internal_hooks() -> None:
    error = refused("synthetic", bogus=1)
    assert error.field == "options.bogus"
    assert error.reason.endswith("known: latency_ms, failure_probability, outage_file")
    assert "now_ms" not in error.reason and "sleep" not in error.reason


def test_an_internal_hook_is_not_an_option() -> None:
    assert refused("synthetic", now_ms=5).field == "options.now_ms"
    assert refused("synthetic", sleep="fast").field == "options.sleep"
    SyntheticPipeline(now_ms=lambda: 5, sleep=lambda s: None)  # still there for tests


def test_a_factory_with_keyword_options_takes_them() -> None:
    handler = build_pipeline(f"{HERE}:with_keywords", region="eu", retries="3")
    assert isinstance(handler, Echo)
    assert handler.options == {"region": "eu", "retries": 3}  # text that reads as a number


def test_options_given_as_text_become_the_annotated_types() -> None:
    options = parse_options(
        ["cluster=0123", "limit=7", "ratio=1", "verbose=true", "mode=slow", "path=/tmp/x"],
        convert=str,  # as the worker's command line passes them
    )
    handler = build_pipeline(f"{HERE}:typed", **options)
    assert isinstance(handler, Echo)
    assert handler.options == {
        "cluster": "0123",  # text stays text, its leading zero kept
        "limit": 7,
        "ratio": 1.0,
        "verbose": True,
        "mode": "slow",
        "path": "/tmp/x",
    }


@pytest.mark.parametrize(
    ("options", "field", "reason"),
    [
        ({"cluster": "c", "limit": "many"}, "options.limit", "must be an integer, got 'many'"),
        ({"cluster": "c", "limit": 2.5}, "options.limit", "must be an integer, got 2.5"),
        ({"cluster": "c", "verbose": "maybe"}, "options.verbose", "must be true or false"),
        ({"cluster": "c", "mode": "medium"}, "options.mode", "must be one of 'fast', 'slow'"),
        ({"cluster": 12}, "options.cluster", "must be text, got 12"),
        ({}, "options.cluster", "pipeline 'tests.pipelines.test_options:typed' requires"),
    ],
)
def test_an_ill_typed_or_missing_option_is_refused_by_name(
    options: dict[str, Any], field: str, reason: str
) -> None:
    error = refused(f"{HERE}:typed", **options)
    assert error.field == field
    assert reason in error.reason


def test_a_factory_that_makes_no_handler_is_refused() -> None:
    error = refused(f"{HERE}:not_a_handler")
    assert error.field == "pipeline" and "made a int, not a handler" in error.reason


def test_a_factory_may_make_an_async_handler() -> None:
    handler = build_pipeline(f"{HERE}:async_factory", delay_ms="5")
    assert handler_kind(handler) == "coroutine"


def test_the_command_line_refuses_a_hook_without_listing_hooks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--pipeline", "synthetic", "--option", "bogus=1"]) == 2
    err = capsys.readouterr().err
    assert "options.bogus" in err and "now_ms" not in err and "sleep" not in err
    assert main(["--pipeline", "synthetic", "--option", "latency_ms=soon"]) == 2
    assert "options.latency_ms: must be an integer, got 'soon'" in capsys.readouterr().err


def test_the_package_ships_py_typed() -> None:
    assert resources.files("streams").joinpath("py.typed").is_file()
    root = Path(__file__).resolve().parents[2]
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["streams"]
