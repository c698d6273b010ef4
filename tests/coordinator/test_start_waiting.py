"""A coordinator that starts while the cluster does not answer waits for it, saying so, and
stops when asked (streams.coordinator.startup.prepare_topics_waiting): it used to exit at once,
and its supervisor restarted it into the same exit (the cluster chaos run's two-down fault)."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

import pytest

from streams.coordinator.confluent.signals import block_stop_signals, stop_signal_within
from streams.coordinator.settings import CoordinatorSettings
from streams.coordinator.startup import START_RETRY_MAX_S, prepare_topics_waiting
from streams.errors import BrokerUnavailable
from streams.topics import Topics


def _settings(tmp_path: Path) -> CoordinatorSettings:
    return CoordinatorSettings(topics=Topics("start"), data_dir=tmp_path, partitions=2)


def test_a_start_waits_for_the_cluster_with_growing_pauses_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _settings(tmp_path)
    tries: list[int] = []
    waits: list[float] = []

    def prepare(s: CoordinatorSettings) -> CoordinatorSettings:
        tries.append(1)
        if len(tries) <= 7:
            raise BrokerUnavailable("could not create topic start.control: Timed out")
        return s

    def stop_asked(wait_s: float) -> bool:
        waits.append(wait_s)
        return False

    with caplog.at_level(logging.WARNING, "streams.coordinator"):
        assert prepare_topics_waiting(settings, stop_asked, prepare) is settings
    assert len(tries) == 8
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, START_RETRY_MAX_S, START_RETRY_MAX_S]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 7 and all("does not answer" in m and "Timed out" in m for m in said)


def test_a_stop_asked_while_waiting_ends_the_start(tmp_path: Path) -> None:
    def prepare(s: CoordinatorSettings) -> CoordinatorSettings:
        raise BrokerUnavailable("no broker answered")

    with pytest.raises(SystemExit, match="stopped while waiting for the cluster"):
        prepare_topics_waiting(_settings(tmp_path), lambda s: True, prepare)


def test_a_blocked_sigterm_is_seen_by_the_wait() -> None:
    """The confluent engine blocks SIGTERM before it starts; its wait must still see one."""
    done: list[bool] = []

    def in_thread() -> None:  # a thread's own mask: the test runner's main thread is untouched
        block_stop_signals()
        threading.Timer(0.2, lambda: signal.pthread_kill(me, signal.SIGTERM)).start()
        done.append(stop_signal_within(5.0))

    worker = threading.Thread(target=in_thread)
    worker.start()
    me = worker.ident
    worker.join(10)
    assert done == [True]
