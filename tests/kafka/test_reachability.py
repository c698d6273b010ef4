"""BrokerWatch: a wait for the brokers, from what clients report (pure: times are given)."""

from __future__ import annotations

from streams.kafka.reachability import BrokerWatch, Waiting


def test_a_wait_runs_from_the_first_failure_to_the_next_answer() -> None:
    watch = BrokerWatch()
    assert watch.waiting(0) is None and watch.health(0) == {"kafka": "ok"}
    assert watch.unreachable(1000, "refused") is True
    assert watch.unreachable(2000, "timed out") is False  # the same wait
    assert watch.waiting(31_000) == Waiting(1000, 30_000, "timed out", 2)
    assert watch.health(31_000) == {
        "kafka": "waiting_for_brokers",
        "kafka_waiting_since_ms": 1000,
        "kafka_waited_s": 30.0,
        "kafka_last_error": "timed out",
    }
    assert watch.recovered() is None
    watch.reachable(41_000)
    assert watch.waiting(41_000) is None
    assert watch.recovered() == Waiting(1000, 40_000, "timed out", 2)
    assert watch.recovered() is None  # said once
    assert watch.unreachable(50_000, "refused") is True  # a new wait


def test_the_warning_comes_once_a_minute_of_the_wait() -> None:
    watch = BrokerWatch(warn_every_ms=60_000)
    watch.unreachable(0, "refused")
    due = [t for t in range(0, 200_000, 1000) if watch.warning_due(t) is not None]
    assert due == [60_000, 120_000, 180_000]


def test_a_client_that_reports_only_failures_has_reconnected_after_a_quiet_spell() -> None:
    watch = BrokerWatch(quiet_ms=10_000)
    for t in range(0, 90_000, 100):
        watch.unreachable(t, "refused")
    assert watch.waiting(95_000) is not None
    assert watch.waiting(99_901) is None
    assert watch.recovered() == Waiting(0, 99_900, "refused", 900)


def test_the_end_of_a_blip_is_not_announced() -> None:
    watch = BrokerWatch(quiet_ms=10_000)
    watch.unreachable(0, "refused")
    watch.reachable(100)  # a connection made again at once
    assert watch.recovered() is None
    watch.unreachable(1000, "refused")
    watch.reachable(7000)
    assert watch.recovered() == Waiting(1000, 6000, "refused", 1)


def test_a_blip_after_a_long_wait_does_not_hide_the_long_waits_end() -> None:
    # The broker comes back: a record read ends the wait; then, before the next tick says so,
    # aiokafka fails one heartbeat while the group coordinator loads, and the next record ends
    # that blip too (a Faust coordinator's log lacked "answer again" in a full make test).
    watch = BrokerWatch(quiet_ms=10_000)
    watch.unreachable(0, "refused")
    watch.reachable(90_000)
    watch.unreachable(90_200, "coordinator not available")
    watch.reachable(90_300)
    assert watch.recovered() == Waiting(0, 90_000, "refused", 1)
    assert watch.recovered() is None
    # Two waits worth saying before a tick: the later one is said.
    watch.unreachable(100_000, "refused")
    watch.reachable(110_000)
    watch.unreachable(111_000, "refused")
    watch.reachable(120_000)
    assert watch.recovered() == Waiting(111_000, 9000, "refused", 1)
