"""The JSON Schemas of every topic's value, generated from the models (`python -m streams.wire`
writes them to `schemas/`; tests/test_wire.py fails when the committed ones drift)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from streams.wire.bypassed import BypassedMessage
from streams.wire.commits import CommitMessage
from streams.wire.control import CONTROL_ADAPTER
from streams.wire.health import HealthMessage
from streams.wire.pipelines import PipelineMessage
from streams.wire.rejected import RejectedMessage
from streams.wire.results import RESULT_ADAPTER
from streams.wire.sources import SourceViewMessage
from streams.wire.tasks import TaskMessage
from streams.wire.views import ViewMessage

SCHEMAS: dict[str, Any] = {
    "control": CONTROL_ADAPTER,
    "results": RESULT_ADAPTER,
    "tasks": TaskMessage,
    "commits": CommitMessage,
    "bypassed": BypassedMessage,
    "streams": ViewMessage,
    "rejected": RejectedMessage,
    "health": HealthMessage,
    "pipelines": PipelineMessage,
    "sources": SourceViewMessage,
}
# The repository's schemas/ folder, the default target of `python -m streams.wire`.
SCHEMA_DIR = Path(__file__).parents[2] / "schemas"


def json_schema(topic: str) -> dict[str, Any]:
    model = SCHEMAS[topic]
    schema: dict[str, Any] = (
        model.json_schema() if isinstance(model, TypeAdapter) else (model.model_json_schema())
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"tidemark {topic} value",
        **schema,
    }


def write_schemas(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for topic in SCHEMAS:
        path = folder / f"{topic}.schema.json"
        path.write_text(json.dumps(json_schema(topic), indent=2, sort_keys=True) + "\n")
        paths.append(path)
    return paths
