"""The docs' "Writing a pipeline" (docs/pipelines.md, moved there from the README) shows the
example pipeline and its test as they are."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_show_the_example_and_its_test_verbatim() -> None:
    readme = (ROOT / "docs/pipelines.md").read_text()
    example = (ROOT / "streams/examples/jsonl_pipeline.py").read_text()
    code = example[example.index("import json") :]  # after the module's docstring
    test = (ROOT / "tests/examples/test_jsonl_pipeline.py").read_text()
    assert f"```python\n{code}```" in readme
    assert f"```python\n{test}```" in readme
