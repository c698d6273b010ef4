"""The wire codec's layout: one module per topic holds both directions of its codec, no module
is over 400 lines, and `streams.wire` re-exports every name, so that importers keep one way in."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import streams.wire
from streams.wire import SCHEMAS

# topic -> (module, its writer, its reader)
CODECS = {
    "control": ("control", "encode_control", "decode_control"),
    "tasks": ("tasks", "encode_task", "decode_task"),
    "results": ("results", "encode_result", "decode_result"),
    "commits": ("commits", "encode_commit", "decode_commit"),
    "bypassed": ("bypassed", "encode_bypassed", "decode_bypassed"),
    "streams": ("views", "encode_view", "decode_view"),
    "rejected": ("rejected", "rejected_value", "decode_rejected"),
    "health": ("health", "encode_health", "decode_health"),
    "pipelines": ("pipelines", "encode_pipeline", "decode_pipeline"),
    "sources": ("sources", "encode_source_view", "decode_source_view"),
}
MAX_LINES = 400


def test_every_topic_with_a_schema_has_a_codec_module() -> None:
    assert set(CODECS) == set(SCHEMAS)


@pytest.mark.parametrize("topic", sorted(CODECS))
def test_a_topics_module_holds_both_directions_and_the_package_reexports_them(topic: str) -> None:
    name, write, read = CODECS[topic]
    module = importlib.import_module(f"streams.wire.{name}")
    for function in (write, read):
        assert getattr(module, function).__module__ == module.__name__
        assert getattr(streams.wire, function) is getattr(module, function)


def test_every_exported_name_resolves() -> None:
    missing = [name for name in streams.wire.__all__ if not hasattr(streams.wire, name)]
    assert missing == []


def test_no_module_of_the_codec_is_over_400_lines() -> None:
    folder = Path(streams.wire.__file__).parent
    sizes = {path.name: len(path.read_text().splitlines()) for path in folder.glob("*.py")}
    assert len(sizes) >= len(CODECS)
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
