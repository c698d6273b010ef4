import json
from pathlib import Path

from streams.examples.jsonl_pipeline import JsonlPipeline
from streams.testing import TASKS, InProcessWorker, assert_ack, assert_nack, make_task, run_handler


def test_it_appends_the_windows_points_and_acks_the_last(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    task = make_task("files-1", params={"path": str(out)})  # one minute at 15 s steps

    assert_ack(run_handler(JsonlPipeline(), task), ack_ms=task.end_ms)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["t_ms"] - task.start_ms for r in rows] == [15_000, 30_000, 45_000, 60_000]


def test_a_task_without_a_path_is_nacked_bad_params() -> None:
    assert_nack(run_handler(JsonlPipeline(), make_task()), "bad_params", "params.path")


def test_a_worker_sends_the_ack_and_commits_its_offset(tmp_path: Path) -> None:
    worker = InProcessWorker(JsonlPipeline())
    (offset,) = worker.give(make_task(params={"path": str(tmp_path / "out.jsonl")}))
    worker.work()

    assert [r["outcome"] for r in worker.results()] == ["ack"]
    assert worker.committed == {(TASKS, 0): offset + 1}
