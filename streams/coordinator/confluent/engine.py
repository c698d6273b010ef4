"""The `confluent` engine: the Processor under Kafka transactions, exactly once (KIP-447).

One loop, like a Kafka Streams stream thread: poll inputs, hand each to the Processor, run the
time-driven work of owned partitions (a punctuator, no tick topic), and every
`commit_interval_ms` (or as soon as the input runs dry) commit one transaction holding every
output, the changelog record of every state written, and the input offsets. Only then is the
local RocksDB written (rocks.py, beside this module). An abortable error aborts, discards the
uncommitted state and rewinds the inputs; clients that cannot go on (a failed abort, a fenced
producer, a fatal error, a run of aborts) are renewed in the process, after waiting for the
cluster if it is gone (streams/coordinator/confluent/renewal.py, which says when it still exits).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from streams.buildinfo import BuildInfoCollector
from streams.clock import now_ms
from streams.coordinator.catchup import CatchUp
from streams.coordinator.confluent.clients import TransactionClients, TransactionEmitter
from streams.coordinator.confluent.commit import commit
from streams.coordinator.confluent.crash_points import CrashHook
from streams.coordinator.confluent.delivery import TransactionDelivery
from streams.coordinator.confluent.pacing import AbortStreak, CommitPacing
from streams.coordinator.confluent.renewal import (
    ClientRenewal,
    ClientsStuck,
    RenewalCollector,
    close_within,
)
from streams.coordinator.confluent.rocks import REPLAYS, STREAMS, TransactionalState
from streams.coordinator.confluent.watchdog import LoopWatchdog
from streams.coordinator.guard import guard
from streams.coordinator.limits_table import limits_table
from streams.coordinator.pipelines import TasksTopicGuard, tasks_topic_ensurer
from streams.coordinator.processor import Processor, partition_of
from streams.coordinator.settings import CoordinatorSettings
from streams.coordinator.telemetry.metrics import CoordinatorMetrics
from streams.errors import TidemarkError
from streams.kafka.changelog import ChangelogReader
from streams.kafka.transactions import TransactionalClients, cluster_answers
from streams.kafka.txn_errors import TransactionAborted, TransactionFatal

log = logging.getLogger("streams.coordinator")

BATCH_MAX = 2000
# A batch poll returns when it is full or at its timeout, so the timeout is what the first
# input of a burst may wait: a few ms (polling that often while idle costs about 1% of a core).
POLL_S = 0.005
GC_THRESHOLD = 50_000
# Due streams handled per loop step, shared among the partitions due (at least the minimum
# each); the rest stay due for the next step, which polls without waiting. A backlog of a
# million due streams (a restart) then goes out in transactions of bounded size, instead of one
# that holds the loop for a minute and outlives `transaction.timeout.ms`. As many as a poll's
# batch: 256 split a burst of 1,000 live windows into four transactions, and the dispatch delay
# p99 went from 141 to 210-235 ms (bench/coordinator_bench.py).
TICK_BUDGET = BATCH_MAX
TICK_MIN_PER_PARTITION = 16
# A clean stop commits and leaves the group; when that cannot finish (the broker is gone) the
# process exits anyway: nothing uncommitted was ever visible, and a restart redoes it.
STOP_DEADLINE_S = 8.0
# Aborted transactions are made again for at least this long (or three session timeouts)
# before the engine renews its clients (streams.coordinator.confluent.pacing.AbortStreak).
ABORT_STREAK_MIN_S = 60.0


class ConfluentEngine:
    def __init__(
        self,
        settings: CoordinatorSettings,
        clients: Callable[[], TransactionClients] | None = None,
        probe: Callable[[], bool] | None = None,
    ) -> None:
        """`clients` makes the Kafka clients (at start and at each renewal); `probe` says
        whether the cluster answers (default: a fresh client's metadata request)."""
        self.settings = settings
        self._crash = CrashHook(os.environ.get("TIDEMARK_CRASH_AT"))
        t = self.topics = settings.topics
        self.inputs = (t.control, t.results)
        self._make_clients = self._new_clients if clients is None else clients
        self.clients = self._make_clients()
        self.state = TransactionalState(
            settings.data_dir / "eos",
            lambda s: partition_of(s.encode(), settings.partitions),
            cleanup_delay_ms=settings.state_cleanup_delay_ms,
        )
        self.metrics = CoordinatorMetrics(
            top_laggards=settings.top_laggards, behind_threshold_s=settings.behind_threshold_s
        )
        self.metrics.registry.register(BuildInfoCollector(engine="confluent"))
        source_health, self._health_table = guard(settings)
        self._limits_table, source_limits = limits_table(settings)
        self._emitter = TransactionEmitter(self.clients)
        ensure = tasks_topic_ensurer(settings, aborts=True)  # a pipeline's topic, on first use
        self.processor = Processor(
            t,
            settings.partitions,
            self.state.view(STREAMS),
            TasksTopicGuard(t, self._emitter, ensure),
            settings.flush_ms,
            replay_store=self.state.view(REPLAYS),
            replay_concurrency=settings.replay_concurrency,
            metrics=self.metrics,
            delivery=TransactionDelivery(settings.view_interval_ms),
            # takeover grace: deadlines count once `results` are read (at most a session later)
            catch_up_max_ms=settings.catch_up_max_ms,
            health=source_health,
            source_limits=source_limits,
        )
        self.positions: dict[tuple[str, int], int] = {}
        self.owned: set[int] = set()
        self._ticks_left = False  # the last step left due streams past its budget
        self.status = "starting"
        self.stats: Counter[str] = Counter()
        self._moved = False  # input positions moved since the last commit
        # Partitions of `results` not yet read up to where they ended at assignment.
        self.catch_up = CatchUp(self.processor.on_caught_up)
        self._stopping = threading.Event()
        self.watchdog = LoopWatchdog()
        self.renewal = ClientRenewal(
            self._drop_clients,
            self._renew_clients,
            (lambda: cluster_answers(settings.kafka)) if probe is None else probe,
            self._stopping,
            idle=lambda: self.watchdog.idle(),
        )
        self.metrics.registry.register(RenewalCollector(self.renewal))

    def _new_clients(self) -> TransactionalClients:
        return TransactionalClients(
            self.settings.kafka,
            group_id=self.topics.eos_group,
            transactional_id=f"{self.topics.eos_group}-{self.settings.instance}",
            session_timeout_ms=self.settings.session_timeout_ms,
        )

    # -- the loop -------------------------------------------------------------------------

    def _drop_clients(self) -> None:
        """Void the open transaction and uncommitted state, release every partition (as a lost
        assignment does: the stores close, the Processor forgets them), and abandon the
        clients, closed within a bounded wait (streams.coordinator.confluent.renewal)."""
        self.state.abort()
        self.processor.reset()
        self._release(set(self.owned))
        self.positions = {}
        self._ticks_left = False
        old = self.clients
        old.detach()
        close_within(old.close)

    def _renew_clients(self) -> None:
        """New clients: their init_transactions fences the old producer and aborts its
        transaction, then they join the group, whose assignment restores the partitions from
        the changelog and the committed offsets, as at start."""
        self.state.date_released(now_ms())  # an outage's length does not count towards cleanup
        self.clients = self._make_clients()
        self._emitter.bind(self.clients)
        self.clients.init_transactions()
        self.clients.subscribe(self.inputs, self._on_assigned, self._on_revoked, self._on_lost)
        self.stats["renewals"] += 1

    def run(self) -> None:
        self._health_table.start()
        self._limits_table.start()
        try:  # a start while the transaction coordinator moves waits as a running loop does
            self.clients.init_transactions()
            self.clients.subscribe(self.inputs, self._on_assigned, self._on_revoked, self._on_lost)
        except TidemarkError as exc:
            self.renewal.recover(exc)
        pacing = CommitPacing(
            self.settings.commit_interval_ms / 1000,
            min(POLL_S, self.settings.tick_interval_ms / 1000),
        )
        last_commit = time.monotonic()
        streak_s = max(ABORT_STREAK_MIN_S, 3 * self.settings.session_timeout_ms / 1000)
        aborts = AbortStreak(streak_s)
        self.status = "ok"
        self.watchdog.start()
        beat = self.watchdog.beat
        while not self._stopping.is_set():
            beat()
            try:
                try:
                    if self._step(pacing, last_commit):
                        last_commit = time.monotonic()
                        aborts.committed()
                        self.renewal.committed()
                except TransactionAborted as exc:
                    log.warning("transaction aborted (%s); state and inputs rewound", exc)
                    self._abort()
                    if aborts.aborted(time.monotonic()):
                        raise ClientsStuck(
                            f"every transaction aborted for {aborts.max_s:.0f} s (the last: "
                            f"{exc}); new clients are needed"
                        ) from exc
            except TidemarkError as exc:  # TransactionFatal, or e.g. a restore with no broker
                self.renewal.recover(exc)  # returns with new clients; exits as a last resort
                aborts = AbortStreak(streak_s)
                last_commit = time.monotonic()
        self._stop()

    def _step(self, pacing: CommitPacing, last_commit: float) -> bool:
        """Poll, process, punctuate, and commit when due; return whether it committed."""
        # Due work left by the last step's budget goes on at once, the inputs read in between.
        batch = self.clients.poll(BATCH_MAX, pacing.poll_timeout_s(self._ticks_left))
        now = now_ms()
        process = self.processor.on_message
        positions = self.positions
        for topic, partition, offset, key, value in batch:
            try:
                process(topic, partition, offset, key, value, now)
            except (TransactionAborted, TransactionFatal):
                raise
            except Exception:  # a bug must not stop the coordinator
                log.exception("failed on %s[%d]@%d", topic, partition, offset)
            positions[(topic, partition)] = offset + 1
        if self.catch_up.pending:
            self._note_caught_up()
        if batch:
            self._moved = True
        self._ticks_left = self._punctuate(now)
        self.state.tidy(now)  # the stores of partitions revoked long enough ago
        pending = self._moved or self.clients.in_transaction or self.processor.dirty(now)
        if pacing.commit_now(len(batch), pending, time.monotonic() - last_commit):
            self.commit(now)
            return True
        return False

    def _note_caught_up(self) -> None:
        """Tell the Processor which partitions have read `results` as far as they stood at
        assignment, so that their deadlines count from now on."""
        results = self.topics.results
        for p in list(self.catch_up.pending):
            self.catch_up.reached(p, self.positions.get((results, p), -1))

    def _punctuate(self, now: int) -> bool:
        """The time-driven work due, within the step's budget; return whether some is left."""
        self.processor.health_tick(now)  # its counts join the open transaction
        partitions = self.processor.partitions_to_tick(now)
        limit = max(TICK_MIN_PER_PARTITION, TICK_BUDGET // max(1, len(partitions)))
        left = False
        for partition in partitions:
            try:
                left = self.processor.on_tick(partition, now, limit) >= limit or left
            except (TransactionAborted, TransactionFatal):
                raise
            except Exception:
                log.exception("time-driven work of partition %d failed", partition)
        return left

    # -- one transaction ------------------------------------------------------------------

    def commit(self, now: int) -> None:
        """Commit the open transaction (streams.coordinator.confluent.commit, in its steps)."""
        done = commit(
            self.clients,
            self.processor,
            self.state,
            self.positions,
            self.topics.eos_changelog,
            now,
            self._crash.reached,
        )
        self._moved = False
        self.stats["transactions"] += 1
        self.stats["changelog_records"] += done.changelog_records

    def _abort(self) -> None:
        """Void the open transaction: drop uncommitted state, rebuild, rewind the inputs."""
        self.stats["aborts"] += 1
        self.clients.abort()
        self.state.abort()
        self.processor.reset()
        committed = self.clients.committed(list(self.positions))
        self.positions = committed
        self.clients.seek(committed)
        self._moved = False

    # -- rebalances (called inside poll) --------------------------------------------------

    def _on_assigned(self, tps: list[tuple[str, int]]) -> None:
        self.status = "restoring"
        began = time.monotonic()
        # Fetch the offsets first: that waits for a previous owner's open transaction to end,
        # so the changelog read next holds all of its writes or none.
        offsets = self.clients.committed(tps)
        partitions = sorted({p for _, p in tps})
        restored = self._restore(partitions)
        self.positions.update(offsets)
        self.clients.assign(offsets)
        self.owned.update(partitions)
        self.processor.on_assigned(partitions)
        results = self.topics.results
        generation = self.catch_up.assigned()
        for p in partitions:  # where `results` stand now: read that far before any timeout
            low, end = self.clients.watermarks(results, p)
            committed = offsets.get((results, p), -1)
            self.catch_up.expect(generation, p, committed if committed >= 0 else low, end)
        self.status = "ok"
        log.info(
            "assigned partitions %s: %d changelog records restored in %.2f s",
            partitions,
            restored,
            time.monotonic() - began,
        )

    def _restore(self, partitions: list[int]) -> int:
        """Bring the partitions' stores up to the end of their changelog, read all at once;
        return the records applied."""
        with ChangelogReader(self.settings.kafka, self.topics.eos_changelog) as reader:
            return self.state.restore(reader, partitions)

    def _on_revoked(self, tps: list[tuple[str, int]]) -> None:
        partitions = {p for _, p in tps}
        if self._moved or self.clients.in_transaction:
            try:
                self.commit(now_ms())
            except TransactionAborted as exc:
                log.warning("commit on revocation aborted (%s)", exc)
                self.clients.abort()
                self.state.abort()
                self.processor.reset()
        self._release(partitions)

    def _on_lost(self, tps: list[tuple[str, int]]) -> None:
        log.warning("partitions %s lost: the open transaction is aborted", sorted(tps))
        self.clients.abort()
        self.state.abort()
        self.processor.reset()
        self._release({p for _, p in tps})

    def _release(self, partitions: set[int]) -> None:
        self.processor.on_revoked(partitions)
        for p in partitions:
            self.state.close(p)
        self.positions = {tp: o for tp, o in self.positions.items() if tp[1] not in partitions}
        self.catch_up.forget(partitions)
        self.owned -= partitions
        self._moved = False

    # -- stopping -------------------------------------------------------------------------

    def request_stop(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()

        def give_up() -> None:
            log.error(
                "could not stop cleanly within %g s (is the broker reachable?); exiting: "
                "nothing uncommitted was visible, and a restart processes it again",
                STOP_DEADLINE_S,
            )
            logging.shutdown()
            os._exit(1)

        timer = threading.Timer(STOP_DEADLINE_S, give_up)
        timer.daemon = True
        timer.start()

    def _stop(self) -> None:
        self.status = "stopping"
        self.watchdog.stop()
        try:
            if self._moved or self.clients.in_transaction:
                self.commit(now_ms())
        except TransactionAborted as exc:
            log.warning("final commit aborted (%s)", exc)
            self.clients.abort()
        self.clients.close()  # leaves the group; the revocation commits nothing more
        self._health_table.stop()
        self._limits_table.stop()
        self.state.close_all()

    def health(self) -> dict[str, Any]:
        return {
            "engine": "confluent",
            "status": self.renewal.status or self.status,
            **self.renewal.health(),
            "partitions": sorted(self.owned),
            "indexed_streams": len(self.processor.index),
            "stats": {**self.processor.stats, **self.stats},
        }
