"""The coordinator's adapter logic, free of any engine: one facade over three ideas.

`Processor.on_message` handles one input from `control`, `results` or the internal `ticks`
topic. The engines (the Faust app, streams/coordinator/faust/app.py; the confluent one,
streams/coordinator/confluent/engine.py) feed it events and give it a `StateStore`, an
`Emitter` and their unit of work, a `Delivery` (streams.coordinator.delivery); tests drive it
in-process with in-memory ones (tests/coordinator/fakes.py). The ideas live apart:

- `inputs`: the input path, decode → load → decide → save → emit;
- `announcer`: announcing finished windows on `commits`;
- `views`: publishing each stream's view on `streams`;
- `ownership`: owned partitions, their due-index, ticks, and the rebuild from the store;
- `records`: the records in memory;
- the engine's delivery, which builds the last three and says when outputs and records become
  durable: the Faust outbox (streams.coordinator.faust.outbox) or the Kafka transaction
  (streams.coordinator.confluent.delivery). Nothing else asks which engine runs.

Everything written for a stream happens while handling an event of that stream's partition
(the tick for partition p touches only streams of p), because Faust puts a table write in the
changelog partition of the event being processed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping

from streams import clock
from streams.coordinator.admission import Admission
from streams.coordinator.announcer import FLUSH_MAX_WINDOWS
from streams.coordinator.delivery import Delivery
from streams.coordinator.health import SourceHealth
from streams.coordinator.index import DueIndex
from streams.coordinator.inputs import Inputs
from streams.coordinator.ownership import RETRY_AFTER_ERROR_MS, TICK_RESEND_MS, Ownership
from streams.coordinator.ports import Emitter, StateStore
from streams.coordinator.records import RECORD_CACHE_SIZE
from streams.coordinator.replays import ReplayLane
from streams.coordinator.scavenger import Scavenger
from streams.coordinator.telemetry.admission import AdmissionCollector
from streams.coordinator.telemetry.metrics import CoordinatorMetrics
from streams.coordinator.telemetry.outage import OutageCollector
from streams.coordinator.telemetry.streams import PartitionsCollector
from streams.core.admission import SourceLimits
from streams.kafka.partitioner import partition_of
from streams.topics import Topics

__all__ = [
    "FLUSH_MAX_WINDOWS",
    "RECORD_CACHE_SIZE",
    "RETRY_AFTER_ERROR_MS",
    "TICK_RESEND_MS",
    "Processor",
    "partition_of",
]


class Processor:
    """Handles a coordinator's inputs and time-driven work over a store and an emitter.

    `delivery`: the engine's unit of work (the Faust engine's outbox, or the confluent engine's
    Kafka transaction, which commits outputs and state together at `checkpoint`).
    `monotonic_ms` is the clock of intervals inside the process (a tick's resend); window
    times use the `now_ms` each call passes.
    `source_limits`: the latest limits per source (the `sources` view read whole:
    streams.coordinator.limits_table; None while not known yet); with `health`, every
    dispatch is admitted by them (streams.coordinator.admission); without, nothing is gated.
    `catch_up_max_ms`: takeover grace (see `streams.coordinator.ownership`); an engine that
    passes it calls `on_caught_up(p)` once it has read `results` of p up to where they stood
    at assignment, and deadlines of p count only from then (or after catch_up_max_ms).
    """

    def __init__(
        self,
        topics: Topics,
        partitions: int,
        store: StateStore,
        emitter: Emitter,
        flush_ms: int = 200,
        *,
        delivery: Delivery,
        replay_store: StateStore | None = None,
        replay_concurrency: int = 2,
        metrics: CoordinatorMetrics | None = None,
        monotonic_ms: Callable[[], int] = clock.monotonic_ms,
        catch_up_max_ms: int | None = None,
        health: SourceHealth | None = None,
        source_limits: Callable[[], Mapping[str, SourceLimits] | None] | None = None,
    ) -> None:
        self.topics = topics
        self.partitions = partitions
        self.store = store
        self.emitter = emitter
        self.flush_ms = flush_ms
        self._delivery = delivery
        self.index = DueIndex()
        self._ticks_topic = topics.ticks  # a `Topics` property formats it on every read
        self.stats: Counter[str] = Counter()
        self._metrics = CoordinatorMetrics() if metrics is None else metrics
        self.replays = (
            None
            if replay_store is None
            else ReplayLane(
                topics,
                replay_store,
                emitter,
                self.stats,
                replay_concurrency,
                self._metrics,
                delivery.replay_announcer(topics, emitter),
            )
        )
        self._records = delivery.records(store)
        self._announcer = delivery.announcer(
            topics,
            emitter,
            self.stats,
            self._metrics,
            flush_ms,
            wake=lambda stream_id: self._ownership.wake(stream_id),
        )
        self._views = delivery.views(topics, wake=lambda stream_id: self._ownership.wake(stream_id))
        self._scavenger = Scavenger(self.replays)
        self._inputs = Inputs(
            topics,
            partitions,
            self._records,
            self._announcer,
            emitter,
            self.index,
            self.replays,
            self.stats,
            self._metrics,
            self._views,
            self._scavenger,
        )
        self._ownership = Ownership(
            partitions,
            self._records,
            self._announcer,
            self._inputs,
            self.index,
            self.replays,
            self._metrics,
            self._views,
            self._scavenger,
            monotonic_ms,
            catch_up_max_ms,
        )
        ownership = self._ownership
        self._metrics.registry.register(
            PartitionsCollector(lambda: len(ownership.assigned), partitions)
        )
        self.health = health  # the outage guard: see `health_tick`
        if health is not None:
            self._metrics.registry.register(
                OutageCollector(lambda: health.outages, health.policy.max_hold_ms)
            )
        self._inputs.health = self._ownership.health = health
        # Admission needs the health view: each coordinator's share of a capped source is read
        # from it.
        self.admission = (
            None
            if source_limits is None or health is None
            else Admission(source_limits, self._wake)
        )
        self._inputs.admission = self._ownership.admission = self.admission
        if self.replays is not None:
            self.replays.admission = self.admission
        if self.admission is not None:
            admission = self.admission
            self._metrics.registry.register(
                AdmissionCollector(lambda: admission.gates, lambda: admission.dispatched)
            )

    @property
    def metrics(self) -> CoordinatorMetrics:
        return self._metrics

    @metrics.setter
    def metrics(self, metrics: CoordinatorMetrics) -> None:
        self._metrics = metrics
        for part in (self._announcer, self._inputs, self._ownership, self.replays):
            if part is not None:
                part.metrics = metrics

    # -- partition ownership -------------------------------------------------------------

    def on_assigned(self, partitions: Iterable[int]) -> None:
        """New partitions (of `control`/`results`): rebuilt from the store before their first
        input or tick is handled."""
        self._ownership.on_assigned(partitions)

    def on_revoked(self, partitions: Iterable[int]) -> None:
        """Partitions gone to another owner; the confluent engine commits first."""
        self._ownership.on_revoked(partitions)

    def on_caught_up(self, partition: int) -> None:
        """`results` of `partition` are read up to where they stood when it was assigned."""
        self._ownership.on_caught_up(partition)

    @property
    def assigned(self) -> frozenset[int]:
        return frozenset(self._ownership.assigned)

    def partitions_to_tick(self, now_ms: int) -> list[int]:
        """Owned partitions that need a tick now: unbuilt, or with something due (streams kept
        waiting by admission are woken first, when their source has room)."""
        if self.admission is not None:
            self.admission.pump(now_ms)
        return self._ownership.partitions_to_tick(now_ms)

    def _wake(self, partition: int, stream_id: str, at_ms: int) -> None:
        if partition in self._ownership.assigned:
            self.index.set(partition, stream_id, at_ms)

    # -- inputs and time -----------------------------------------------------------------

    def on_message(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        now_ms: int,
    ) -> None:
        """Handle one input. Malformed input is rejected (to `rejected`), never raised, and a
        failure while handling one stream touches no other (see `streams.coordinator.inputs`).
        Only the engine's own errors (`TidemarkError`s of the broker or transaction) propagate.
        """
        if topic == self._ticks_topic:
            self.on_tick(partition, now_ms)
            return
        ownership = self._ownership
        if ownership.unbuilt and partition in ownership.unbuilt:
            ownership.build(now_ms)
        self._inputs.handle(topic, partition, offset, key, value, now_ms)

    def on_tick(self, partition: int, now_ms: int, limit: int | None = None) -> int:
        """Time-driven work of one partition: dispatches, deadlines and flushes that are due
        (at most `limit` streams of it; the rest stay due). Returns how many it handled."""
        return self._ownership.on_tick(partition, now_ms, limit)

    @property
    def unbuilt(self) -> set[int]:
        """Owned partitions not yet rebuilt from the store: their first input or tick does it."""
        return self._ownership.unbuilt

    def building(self, now_ms: int) -> Iterator[int]:
        """Rebuild the unbuilt partitions a slice at a time, ahead of their first input (see
        `Ownership.building`); run it to its end, and again while `unbuilt` is not empty."""
        return self._ownership.building(now_ms)

    def health_tick(self, now_ms: int) -> None:
        """The outage guard's periodic work (see `streams.coordinator.health`): decide every
        source again from the global view, wake the held streams of a source that recovered
        (their tick releases them), and publish this coordinator's counts when due. The
        confluent engine calls it inside its open transaction, Faust from its timer."""
        health = self.health
        if health is None:
            return
        admission = self.admission
        before = {outage.source: outage.held for outage in health.outages}
        for partition, stream_id in health.refresh(now_ms):
            if partition in self._ownership.assigned:
                self.index.set(partition, stream_id, 0)
        topic = self.topics.health
        entries = (
            health.entries(now_ms)
            if admission is None
            else health.entries(now_ms, admission.ledger.load, admission.pacing)
        )
        for key, value in entries:
            self.emitter.send(topic, key, value)
        if admission is not None:
            for outage in health.outages:
                before.pop(outage.source, None)
            if before:  # these ended: their held windows go out by a slow start
                admission.recover(before, now_ms)
            if entries:  # once a publish: a new view of every partition's demand
                admission.refresh(now_ms, health.demands(now_ms), self._ownership.assigned)

    # -- the engine's unit of work -------------------------------------------------------

    def dirty(self, now_ms: int) -> bool:
        """Whether the unit of work holds something to commit, so that the engine commits."""
        return self._delivery.dirty(now_ms)

    def checkpoint(self, now_ms: int) -> None:
        """Called right before the engine commits its unit of work: what the delivery defers
        to a checkpoint joins it (streams.coordinator.delivery.Delivery.checkpoint)."""
        for stream_id in self._delivery.checkpoint(now_ms, self.emitter, self._inputs.failed):
            self.stats["stream_errors"] += 1
            self._metrics.stream_error()
            self._ownership.wake(stream_id)

    def reset(self) -> None:
        """Called after the engine aborted a transaction and rolled its store back: drop
        everything derived in memory; every owned partition is rebuilt before it is used."""
        self._records.reset()
        self._announcer.reset()
        self._views.reset()
        if self.replays is not None:
            self.replays.reset()
        self.index.clear()
        if self.admission is not None:
            self.admission.reset()
        self._ownership.reset()
