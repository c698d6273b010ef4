"""Tasks the worker skips because their deadline passed before they started: each logged at
DEBUG, and one INFO line per loop turn that skipped any (a new group reading a backlog skips
thousands, and a line each drowned the log)."""

from __future__ import annotations

import logging

from streams.handler import Task
from streams.humanize import format_duration_rounded

log = logging.getLogger("streams.worker")


class ExpiredTasks:
    """Counts the tasks a turn skipped as expired, and the latest by how late it was."""

    def __init__(self) -> None:
        self._count = 0
        self._latest_ms = 0

    def skipped(self, task: Task, now_ms: int) -> None:
        late_ms = now_ms - task.deadline_ms
        log.debug("skipping expired task %s: its deadline passed %d ms ago", task.task_id, late_ms)
        self._count += 1
        self._latest_ms = max(self._latest_ms, late_ms)

    def report(self) -> None:
        """The turn's INFO line, if it skipped any; then start counting again."""
        if self._count:
            log.info(
                "skipped %d expired task(s), deadlines passed up to %s ago (each at DEBUG)",
                self._count,
                format_duration_rounded(self._latest_ms),
            )
            self._count, self._latest_ms = 0, 0
