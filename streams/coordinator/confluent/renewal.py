"""The confluent engine renews its Kafka clients instead of exiting (issue 26, item 2).

When its clients fail in a way the transaction API cannot recover from (an abort that fails,
INVALID_TXN_STATE after the broker timed a transaction out, a fatal producer error, a fenced
producer, a run of aborts from a consumer stuck out of its group), the engine does what Kafka
Streams does when it resets a stream thread's producer (StreamsProducer.resetProducer, and
TaskMigratedException: close the tasks dirty, rejoin): it drops the open transaction and the
uncommitted state, releases every partition, abandons the clients (closed on a thread of their
own, waited for a few seconds at most), makes new ones with the same `transactional.id` (whose
`init_transactions` fences the old producer and aborts its transaction) and subscribes again.
A restart of the process did exactly this, so exactly-once holds the same way: nothing of the
void transaction is visible, and the new owner restores from the changelog and the committed
offsets, which wait for that transaction to be resolved.

`RenewalRule` decides, purely, whether to renew now, wait for the cluster, or exit:

- every broker unreachable (a fresh client's metadata request fails: `probe`): wait, probing
  again with a bounded backoff, and say so in /health and once a minute in the log; renew
  once the cluster answers;
- the cluster answers but our clients failed: renew now, then with a backoff if the new ones
  fail too;
- exit (status 1, the reason logged) only as a last resort, in two cases:
  - fenced `FENCES_MAX` times within `FENCE_WINDOW_S`: another live process has this
    `transactional.id` (the same `--instance-id`). A broker that times out a stalled
    transaction fences its producer once, and a renewal gets past that; two live instances
    fence each other at every renewal, and renewing for ever would only make both flap.
  - `RENEWALS_MAX` renewals in a row failed while the cluster answered, over at least
    `FAILING_MAX_S` (no transaction committed in between): the process is wedged in a way new
    clients do not cure (a librdkafka state shared by the process), and only a restart,
    from its supervisor, can help.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from prometheus_client.core import CounterMetricFamily, Metric

from streams.clock import now_ms
from streams.errors import TidemarkError
from streams.kafka.txn_errors import AbortFailed, ProducerFenced, TransactionFatal

log = logging.getLogger("streams.coordinator")

FENCES_MAX = 3
FENCE_WINDOW_S = 300.0
RENEWALS_MAX = 5
FAILING_MAX_S = 600.0
# While the cluster is gone, it is probed again after 1, 2, 4, 8, then every 10 s: it is back
# in service at most about 10 s (plus a probe) after it answers again.
WAIT_BACKOFF_MAX_S = 10.0
# A renewal that failed while the cluster answered is tried again after 1, 2, 4 ... 30 s.
RENEW_BACKOFF_MAX_S = 30.0
REPORT_EVERY_S = 60.0
# How long the loop waits for abandoned clients to close. A close can hang on a gone broker
# (leaving the group, destroying librdkafka's handles): it goes on on a daemon thread.
CLOSE_WAIT_S = 5.0

# Why clients are renewed: the label of tidemark_client_renewals_total.
FENCED = ProducerFenced.reason
ABORT_FAILED = AbortFailed.reason
ABORT_STREAK = "abort_streak"
FATAL = TransactionFatal.reason
ERROR = "error"  # any other error of the engine's (e.g. a restore that found no broker)


class ClientsStuck(TidemarkError):
    """Every transaction aborted for too long: only new clients get out of it."""

    reason = ABORT_STREAK


def reason_of(exc: BaseException) -> str:
    """The renewal reason an error carries (`reason` on the transaction errors), else ERROR."""
    reason = getattr(exc, "reason", ERROR)
    return reason if isinstance(reason, str) else ERROR


class Action(Enum):
    RENEW = "renew"
    WAIT = "wait"
    EXIT = "exit"


@dataclass(frozen=True)
class Decision:
    action: Action
    delay_s: float  # RENEW: wait this long first; WAIT: probe again after this long
    why: str
    report: bool = True  # log it (a WAIT is logged once a minute)


class RenewalRule:
    """When to renew the clients, wait for the cluster, or exit; time passed in (`now_s`)."""

    def __init__(
        self,
        fences_max: int = FENCES_MAX,
        fence_window_s: float = FENCE_WINDOW_S,
        renewals_max: int = RENEWALS_MAX,
        failing_max_s: float = FAILING_MAX_S,
    ) -> None:
        self.fences_max = fences_max
        self.fence_window_s = fence_window_s
        self.renewals_max = renewals_max
        self.failing_max_s = failing_max_s
        self._fences: list[float] = []
        self._failures = 0  # renewals asked for while the cluster answered, since a commit
        self._failing_since_s: float | None = None
        self.waiting_since_s: float | None = None  # the cluster unreachable since then
        self._waits = 0
        self._reported_s: float | None = None

    def committed(self) -> None:
        """A transaction committed: the clients work."""
        self._failures = 0
        self._failing_since_s = None

    def fenced(self, now_s: float) -> Decision | None:
        """The producer was fenced at `now_s` (once per error): an EXIT if it happens too
        often, else None (the clients are renewed as for any failure)."""
        self._fences = [t for t in self._fences if now_s - t < self.fence_window_s]
        self._fences.append(now_s)
        if len(self._fences) < self.fences_max:
            return None
        return Decision(Action.EXIT, 0.0, (
            f"the producer was fenced {len(self._fences)} times within "
            f"{self.fence_window_s:.0f} s: another live process has this transactional.id "
            "(the same --instance-id)"))  # fmt: skip

    def failed(self, reachable: bool, now_s: float) -> Decision:
        """The clients failed (or new ones did) at `now_s`; the cluster answered a probe, or
        not. Called again after each WAIT."""
        if not reachable:
            if self.waiting_since_s is None:
                self.waiting_since_s, self._waits, self._reported_s = now_s, 0, None
            self._failures, self._failing_since_s = 0, None  # the outage explains them
            delay_s = min(WAIT_BACKOFF_MAX_S, 2.0**self._waits)
            self._waits += 1
            report = self._reported_s is None or now_s - self._reported_s >= REPORT_EVERY_S
            if report:
                self._reported_s = now_s
            waited_s = now_s - self.waiting_since_s
            return Decision(Action.WAIT, delay_s, f"no broker has answered for {waited_s:.0f} s",
                            report)  # fmt: skip
        self.waiting_since_s = None
        if self._failing_since_s is None:
            self._failing_since_s = now_s
        self._failures += 1
        failing_s = now_s - self._failing_since_s
        if self._failures > self.renewals_max and failing_s >= self.failing_max_s:
            return Decision(Action.EXIT, 0.0, (
                f"{self._failures - 1} renewals of the clients failed in {failing_s:.0f} s "
                "while the cluster answered"))  # fmt: skip
        delay_s = 0.0 if self._failures == 1 else min(RENEW_BACKOFF_MAX_S,
                                                      2.0 ** (self._failures - 2))  # fmt: skip
        return Decision(Action.RENEW, delay_s, f"renewal {self._failures} since the last commit")


def close_within(close: Callable[[], None], timeout_s: float = CLOSE_WAIT_S) -> bool:
    """Run `close` on a daemon thread and wait at most `timeout_s`; return whether it ended."""

    def run() -> None:
        try:
            close()
        except Exception:
            log.exception("closing the abandoned clients")

    thread = threading.Thread(target=run, name="close-abandoned-clients", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        log.warning("the abandoned clients did not close within %g s (a broker is gone?); "
                    "their close goes on in the background", timeout_s)  # fmt: skip
        return False
    return True


def forget_frames(exc: BaseException) -> None:
    """Drop the locals of an error's finished frames (and its causes'): they hold the old
    clients, whose last reference must go on the closing thread, not the loop's."""
    seen: BaseException | None = exc
    for _ in range(10):  # a chain is a few errors long; never follow a cycle for ever
        if seen is None:
            return
        traceback.clear_frames(seen.__traceback__)
        seen = seen.__cause__ or seen.__context__


class ClientRenewal:
    """The engine's recovery: drop the clients, wait for the cluster if it is gone, renew."""

    def __init__(
        self,
        drop: Callable[[], None],
        renew: Callable[[], None],
        probe: Callable[[], bool],
        stopping: threading.Event,
        rule: RenewalRule | None = None,
        clock: Callable[[], float] = time.monotonic,
        idle: Callable[[], None] = lambda: None,
    ) -> None:
        """`idle` is called while it waits: the loop's watchdog must not report a stall."""
        self._drop, self._renew, self._probe, self._idle = drop, renew, probe, idle
        self._stopping = stopping
        self.rule = RenewalRule() if rule is None else rule
        self._clock = clock
        self.status: str | None = None  # None, "renewing_clients" or "waiting_for_brokers"
        self.since_ms = 0
        self.last_error = ""
        self.renewals: Counter[str] = Counter()

    def committed(self) -> None:
        self.rule.committed()

    def recover(self, exc: TidemarkError) -> None:
        """Return with new clients subscribed (or once a stop is asked for); exit as the rule
        says. The caller starts its loop afresh."""
        first = reason_of(exc)
        forget_frames(exc)
        self._set("renewing_clients", str(exc))
        log.warning("%s (%s): the open transaction and every partition are dropped and the "
                    "clients renewed", exc, first)  # fmt: skip
        self._drop()
        fenced = first == FENCED
        while not self._stopping.is_set():
            self._idle()
            decision = self.rule.fenced(self._clock()) if fenced else None
            fenced = False
            if decision is None:
                decision = self.rule.failed(self._probe(), self._clock())
            if decision.action is Action.EXIT:
                log.error("%s (the last error: %s); exiting: a restart carries on from the last "
                          "commit", decision.why, self.last_error)  # fmt: skip
                raise SystemExit(1)
            if decision.action is Action.WAIT:
                if self.status != "waiting_for_brokers":
                    self._set("waiting_for_brokers", self.last_error)
                if decision.report:
                    log.warning("waiting for the brokers: %s (the last error: %s)", decision.why,
                                self.last_error)  # fmt: skip
                self._stopping.wait(decision.delay_s)
                continue
            if decision.delay_s and self._stopping.wait(decision.delay_s):
                return
            self._set("renewing_clients", self.last_error)
            try:
                self._renew()
            except TidemarkError as again:  # e.g. init_transactions timed out
                reason = reason_of(again)
                fenced = reason == FENCED
                forget_frames(again)
                self.last_error = str(again)
                log.warning("new clients failed (%s, %s): %s", reason, decision.why, again)
                self._drop()
                continue
            self.renewals[first] += 1
            log.warning("new clients are subscribed (%s, after %s; %s)", first,
                        self._since_s(), decision.why)  # fmt: skip
            self.status = None
            return

    def _set(self, status: str, error: str) -> None:
        if self.status is None:
            self.since_ms = now_ms()
        self.status, self.last_error = status, error

    def _since_s(self) -> str:
        return f"{(now_ms() - self.since_ms) / 1000:.1f} s"

    def health(self) -> dict[str, Any]:
        """What the coordinator waits for, for /health (empty while its clients work)."""
        if self.status is None:
            return {}
        return {"waiting": {"for": "brokers" if self.status == "waiting_for_brokers"
                            else "new clients", "since_ms": self.since_ms,
                            "error": self.last_error}}  # fmt: skip


class RenewalCollector:
    """`tidemark_client_renewals_total{reason}`: the clients renewed, by what made them fail."""

    def __init__(self, renewal: ClientRenewal) -> None:
        self._renewal = renewal

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(
            "tidemark_client_renewals",
            "The confluent engine's Kafka clients renewed in process, by reason",
            labels=["reason"],
        )
        for reason, count in sorted(self._renewal.renewals.items()):
            family.add_metric([reason], count)
        yield family
