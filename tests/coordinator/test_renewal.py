"""The renewal rule of the confluent engine (streams.coordinator.confluent.renewal), at explicit
times: wait while no broker answers, renew when the cluster answers, exit only as a last resort."""

from __future__ import annotations

import threading
import time

from prometheus_client import CollectorRegistry, generate_latest

from streams.coordinator.confluent.renewal import (
    ABORT_FAILED,
    ABORT_STREAK,
    FATAL,
    FENCED,
    Action,
    ClientRenewal,
    ClientsStuck,
    RenewalCollector,
    RenewalRule,
    close_within,
    reason_of,
)
from streams.errors import TidemarkError
from streams.kafka.transactions import AbortFailed, ProducerFenced, TransactionFatal


def test_clients_that_fail_while_the_cluster_answers_are_renewed_at_once() -> None:
    rule = RenewalRule()
    decision = rule.failed(reachable=True, now_s=100.0)
    assert decision.action is Action.RENEW and decision.delay_s == 0.0


def test_a_gone_cluster_is_waited_for_with_a_bounded_backoff_reported_once_a_minute() -> None:
    rule = RenewalRule()
    now = 0.0
    delays, reports = [], []
    while now < 300:
        decision = rule.failed(reachable=False, now_s=now)
        assert decision.action is Action.WAIT, decision
        delays.append(decision.delay_s)
        reports.append(decision.report)
        now += decision.delay_s + 5.0  # a probe that times out takes 5 s
    assert delays[:4] == [1.0, 2.0, 4.0, 8.0] and max(delays) == 10.0
    assert reports[0] and 4 <= sum(reports) <= 6, reports  # about once a minute over 5 min
    assert rule.waiting_since_s == 0.0
    back = rule.failed(reachable=True, now_s=now)
    assert back.action is Action.RENEW and back.delay_s == 0.0
    assert rule.waiting_since_s is None


def test_an_outage_of_any_length_never_exits() -> None:
    rule = RenewalRule()
    for second in range(0, 3600, 10):  # an hour without a broker
        assert rule.failed(False, float(second)).action is Action.WAIT


def test_renewals_that_keep_failing_while_the_cluster_answers_back_off_then_exit() -> None:
    rule = RenewalRule(renewals_max=5, failing_max_s=600.0)
    now, decisions = 0.0, []
    while True:
        decision = rule.failed(reachable=True, now_s=now)
        decisions.append(decision)
        if decision.action is Action.EXIT:
            break
        assert decision.action is Action.RENEW
        now += decision.delay_s + 30.0  # each new clients' init_transactions times out
    delays = [d.delay_s for d in decisions[:-1]]
    assert delays[:5] == [0.0, 1.0, 2.0, 4.0, 8.0] and max(delays) == 30.0
    assert now >= 600.0 and len(decisions) > 6
    assert "while the cluster answered" in decisions[-1].why


def test_a_commit_between_failed_renewals_starts_the_count_again() -> None:
    rule = RenewalRule(renewals_max=2, failing_max_s=10.0)
    for i in range(50):  # renewals that each work for a while: never an exit
        assert rule.failed(True, i * 100.0).action is Action.RENEW
        rule.committed()


def test_fenced_over_and_over_means_another_live_instance_and_exits() -> None:
    rule = RenewalRule(fences_max=3, fence_window_s=300.0)
    assert rule.fenced(0.0) is None  # once: a broker timed the transaction out
    assert rule.failed(True, 0.0).action is Action.RENEW
    rule.committed()
    assert rule.fenced(400.0) is None  # the first is forgotten by now
    assert rule.fenced(450.0) is None
    exit_ = rule.fenced(500.0)
    assert exit_ is not None and exit_.action is Action.EXIT
    assert "another live process" in exit_.why


def test_a_fence_then_a_long_outage_counts_one_fence() -> None:
    events: list[str] = []
    answers = iter([False] * 10 + [True])
    clock = iter(float(i) for i in range(100))
    renewal = ClientRenewal(lambda: events.append("drop"), lambda: events.append("renew"),
                            lambda: next(answers), threading.Event(),
                            clock=lambda: next(clock))  # fmt: skip
    renewal._stopping.wait = lambda timeout=None: False  # type: ignore[method-assign]
    renewal.recover(ProducerFenced("commit_transaction: Local: This instance has been fenced"))
    assert events == ["drop", "renew"]
    assert dict(renewal.renewals) == {FENCED: 1}


def test_each_error_names_its_reason() -> None:
    assert reason_of(ProducerFenced("x")) == FENCED
    assert reason_of(AbortFailed("x")) == ABORT_FAILED
    assert reason_of(TransactionFatal("x")) == FATAL
    assert reason_of(ClientsStuck("x")) == ABORT_STREAK
    assert reason_of(TidemarkError("x")) == "error"


def test_recover_waits_then_renews_and_counts_the_renewal_by_its_first_reason() -> None:
    events: list[str] = []
    answers = iter([False, False, True, True])
    clock = iter(float(i) for i in range(100))
    renewal = ClientRenewal(
        drop=lambda: events.append("drop"),
        renew=lambda: events.append("renew"),
        probe=lambda: next(answers),
        stopping=threading.Event(),
        clock=lambda: next(clock),
    )
    statuses: list[str | None] = []
    renewal._stopping.wait = lambda timeout=None: statuses.append(renewal.status) or False  # type: ignore[method-assign]
    renewal.recover(AbortFailed("abort_transaction: INVALID_TXN_STATE"))
    assert events == ["drop", "renew"]
    assert statuses == ["waiting_for_brokers", "waiting_for_brokers"]
    assert renewal.status is None and renewal.health() == {}
    assert dict(renewal.renewals) == {ABORT_FAILED: 1}
    registry = CollectorRegistry()
    registry.register(RenewalCollector(renewal))
    text = generate_latest(registry).decode()
    assert 'tidemark_client_renewals_total{reason="abort_failed"} 1.0' in text


def test_new_clients_that_fail_are_dropped_and_renewed_again() -> None:
    events: list[str] = []
    failures = [TransactionFatal("init_transactions: timed out")]

    def renew() -> None:
        events.append("renew")
        if failures:
            raise failures.pop()

    renewal = ClientRenewal(lambda: events.append("drop"), renew, lambda: True,
                            threading.Event())  # fmt: skip
    renewal._stopping.wait = lambda timeout=None: False  # type: ignore[method-assign]
    renewal.recover(ClientsStuck("every transaction aborted for 60 s"))
    assert events == ["drop", "renew", "drop", "renew"]
    assert dict(renewal.renewals) == {ABORT_STREAK: 1}


def test_a_close_that_hangs_is_given_up_on_after_the_bounded_wait() -> None:
    release = threading.Event()
    began = time.monotonic()
    assert close_within(lambda: release.wait(10) and None, timeout_s=0.2) is False
    assert time.monotonic() - began < 2
    release.set()
    assert close_within(lambda: None, timeout_s=1.0) is True
