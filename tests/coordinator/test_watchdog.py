"""The loop watchdog reports a stuck step with every thread's stack, once per stall."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from streams.coordinator.confluent.watchdog import LoopWatchdog


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def test_a_stall_is_reported_once_per_stall_with_the_stacks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    with open(tmp_path / "stacks", "w+") as out:
        dog = LoopWatchdog(stall_s=60, out=lambda: out, clock=clock)
        dog.beat()
        clock.now_s += 59
        assert dog.check(None) is None and dog.reports == 0
        clock.now_s += 2  # 61 s in one step
        with caplog.at_level(logging.ERROR, "streams.coordinator"):
            reported = dog.check(None)
        assert reported == clock.now_s and dog.reports == 1
        assert "in one step for 61 s" in caplog.text
        out.seek(0)
        stacks = out.read()
        assert "test_a_stall_is_reported_once_per_stall_with_the_stacks" in stacks
        clock.now_s += 30  # the same stall, not yet another 60 s since the report
        assert dog.check(reported) == reported and dog.reports == 1
        clock.now_s += 31
        assert dog.check(reported) == clock.now_s and dog.reports == 2
        dog.beat()  # the loop came around: a new stall counts from here
        clock.now_s += 10
        assert dog.check(clock.now_s) is None and dog.reports == 2


def test_its_thread_reports_a_step_stuck_in_a_blocking_call(tmp_path: Path) -> None:
    with open(tmp_path / "stacks", "w+") as out:
        dog = LoopWatchdog(stall_s=0.2, out=lambda: out).start()
        try:
            time.sleep(1.0)  # the stuck step: a blocking call that releases the GIL
        finally:
            dog.stop()
        assert dog.reports >= 1
        out.seek(0)
        assert "test_its_thread_reports_a_step_stuck_in_a_blocking_call" in out.read()


def test_a_slow_step_is_logged_when_it_ends(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    dog = LoopWatchdog(slow_s=0.25, clock=clock)
    with caplog.at_level(logging.INFO, "streams.coordinator"):
        dog.beat()
        clock.now_s += 0.2
        dog.beat()
        assert dog.slow_steps == 0 and "took" not in caplog.text
        clock.now_s += 0.4
        dog.beat()
    assert dog.slow_steps == 1
    assert "one step of the loop took 400 ms" in caplog.text
