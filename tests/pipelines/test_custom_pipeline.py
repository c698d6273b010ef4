"""A user's own pipeline, loaded by "module:factory" name, as the README shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.errors import InvalidInput
from streams.pipelines import build_pipeline
from streams.worker.api import Ack, Nack, Task

T0 = 1_795_946_400_000  # 2026-11-29T10:00:00Z


def task(**params: object) -> Task:
    return Task(f"s/{T0}/1", "s", T0, T0 + 60_000, 15_000, 1, T0 + 60_000, T0 + 120_000, params)


def test_the_readme_pipeline_writes_the_window_and_acks_its_last_point(tmp_path: Path) -> None:
    handler = build_pipeline("examples.jsonl_pipeline:JsonlPipeline")
    out = tmp_path / "out.jsonl"
    assert handler(task(path=str(out))) == Ack(T0 + 60_000)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["t_ms"] for r in rows] == [T0 + 15_000, T0 + 30_000, T0 + 45_000, T0 + 60_000]
    assert handler(task()) == Nack("bad_params", "params.path must be a file path")


def test_bad_pipeline_names_say_what_is_wrong() -> None:
    with pytest.raises(InvalidInput, match="cannot import 'no_such_module'"):
        build_pipeline("no_such_module:Thing")
    with pytest.raises(InvalidInput, match="has no callable 'Nope'"):
        build_pipeline("examples.jsonl_pipeline:Nope")
