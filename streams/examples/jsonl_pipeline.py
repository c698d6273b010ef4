"""A complete Tidemark pipeline in about 25 lines: append each window's rows to a JSON Lines file.

Run it with:  tidemark worker --pipeline streams.examples.jsonl_pipeline:JsonlPipeline
Task params:  {"path": "/tmp/out.jsonl"}
"""

import json
from pathlib import Path

from pydantic import BaseModel, Field

from streams.worker.api import Ack, Nack, Outcome, Task


class JsonlParams(BaseModel, extra="forbid"):
    """A stream's params: the worker decodes them, the registry announces their schema."""

    path: str = Field(min_length=1, description="the JSON Lines file to append to")


class JsonlPipeline:
    """Called from several threads at once: keep it free of shared mutable state."""

    params_model = JsonlParams  # so the worker calls it as pipeline(task, params)

    def __call__(self, task: Task, params: JsonlParams) -> Outcome:
        # One row per step in (start_ms, end_ms]: the window's data points.
        points = list(range(task.start_ms + task.step_ms, task.end_ms + 1, task.step_ms))
        if not points:
            return Nack("no_data", "the window holds no step")
        with Path(params.path).open("a") as out:  # the "export"
            out.writelines(
                json.dumps({"stream_id": task.stream_id, "t_ms": t}) + "\n" for t in points
            )
        return Ack(ack_ms=points[-1])  # progress moves to the last point delivered
