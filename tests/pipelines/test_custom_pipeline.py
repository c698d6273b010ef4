"""A user's own pipeline, loaded by "module:factory" name, as docs/pipelines.md shows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import streams
from streams.errors import InvalidInput
from streams.pipelines import build_pipeline
from streams.testing import assert_ack, assert_nack, make_task, run_handler

T0 = 1_795_946_400_000  # 2026-11-29T10:00:00Z
EXAMPLE = "streams.examples.jsonl_pipeline:JsonlPipeline"


@pytest.mark.parametrize("name", [EXAMPLE, "examples.jsonl_pipeline:JsonlPipeline"])
def test_the_readme_pipeline_writes_the_window_and_acks_its_last_point(
    tmp_path: Path, name: str
) -> None:
    handler = build_pipeline(name)  # by its packaged name, and by its old one in a checkout
    out = tmp_path / "out.jsonl"
    task = make_task("s", params={"path": str(out)}, start_ms=T0, end_ms=T0 + 60_000)
    assert_ack(run_handler(handler, task), ack_ms=T0 + 60_000)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["t_ms"] for r in rows] == [T0 + 15_000, T0 + 30_000, T0 + 45_000, T0 + 60_000]
    assert_nack(run_handler(handler, make_task()), "bad_params", "params.path: Field required")


def test_the_example_pipeline_loads_outside_the_checkout(tmp_path: Path) -> None:
    """A worker started elsewhere (a container, a deployment) finds the example by its
    packaged name; ``examples.`` is only a directory of the checkout."""
    site = tmp_path / "site"  # the package alone, as an install puts it
    site.mkdir()
    (site / "streams").symlink_to(Path(streams.__file__).parent)
    code = (
        "import sys\n"
        "from streams.errors import InvalidInput\n"
        "from streams.pipelines import build_pipeline\n"
        "print(type(build_pipeline(sys.argv[1])).__name__)\n"
        "try:\n"
        "    build_pipeline('examples.jsonl_pipeline:JsonlPipeline')\n"
        "except InvalidInput as exc:\n"
        "    print(exc.reason)\n"
    )
    found = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r})\n{code}",
         EXAMPLE],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    packaged, old = found.stdout.splitlines()
    assert packaged == "JsonlPipeline"
    assert old.startswith("cannot import 'examples.jsonl_pipeline'")


def test_bad_pipeline_names_say_what_is_wrong() -> None:
    with pytest.raises(InvalidInput, match="cannot import 'no_such_module'"):
        build_pipeline("no_such_module:Thing")
    with pytest.raises(InvalidInput, match="has no callable 'Nope'"):
        build_pipeline("examples.jsonl_pipeline:Nope")
