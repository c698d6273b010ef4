"""The coordinator's adapter logic, free of any engine: one facade over three ideas.

`Processor.on_message` handles one input from `control`, `results` or the internal `ticks`
topic. The engines (the Faust app, streams/coordinator/app.py; the transactional one,
streams/coordinator/eos.py) feed it events and give it a `StateStore` and an `Emitter`; tests
drive it in-process with in-memory ones (tests/coordinator/fakes.py). The ideas live apart:

- `inputs`: the input path, decode → load → decide → save → emit;
- `announcer`: when commits go out, and the Faust engine's outbox and delivery confirmations;
- `ownership`: owned partitions, their due-index, ticks, and the rebuild from the store;
- `records`: the records in memory, written inline (Faust) or once per checkpoint.

Everything written for a stream happens while handling an event of that stream's partition
(the tick for partition p touches only streams of p), because Faust puts a table write in the
changelog partition of the event being processed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from streams import clock
from streams.coordinator.announcer import FLUSH_MAX_WINDOWS, Announcer, Message, send_all
from streams.coordinator.confluent.records import TransactionRecords
from streams.coordinator.gauges import OutageCollector
from streams.coordinator.health import SourceHealth
from streams.coordinator.index import DueIndex
from streams.coordinator.inputs import Inputs
from streams.coordinator.metrics import CoordinatorMetrics
from streams.coordinator.ownership import RETRY_AFTER_ERROR_MS, TICK_RESEND_MS, Ownership
from streams.coordinator.ports import Emitter, StateStore
from streams.coordinator.records import RECORD_CACHE_SIZE, Records, WriteThroughRecords
from streams.coordinator.replays import ReplayLane
from streams.coordinator.scavenger import Scavenger
from streams.coordinator.topics import Topics
from streams.coordinator.views import Views
from streams.errors import InvalidInput, TidemarkError
from streams.kafka.partitioner import partition_of

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

    `transactional=True` is for an engine whose outputs and state commit together: no outbox
    or delivery callbacks, commits flushed once per transaction at `checkpoint`, and state
    written to the store at `checkpoint` only. `monotonic_ms` is the clock of intervals inside
    the process (a tick's resend); window times use the `now_ms` each call passes.
    `catch_up_max_ms`: takeover grace (see `streams.coordinator.ownership`); an engine that
    passes it calls `on_caught_up(p)` once it has read `results` of p up to where they stood
    at assignment, and deadlines of p count only from then (or after catch_up_max_ms).
    `view_interval_ms` (transactional): at most one `streams` view per stream per interval
    (see `streams.coordinator.views`).
    """

    def __init__(
        self,
        topics: Topics,
        partitions: int,
        store: StateStore,
        emitter: Emitter,
        flush_ms: int = 200,
        replay_store: StateStore | None = None,
        replay_concurrency: int = 2,
        metrics: CoordinatorMetrics | None = None,
        transactional: bool = False,
        monotonic_ms: Callable[[], int] = clock.monotonic_ms,
        catch_up_max_ms: int | None = None,
        health: SourceHealth | None = None,
        view_interval_ms: int = 0,
    ) -> None:
        self.topics = topics
        self.partitions = partitions
        self.store = store
        self.emitter = emitter
        self.flush_ms = flush_ms
        self.transactional = transactional
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
                outbox=not transactional,
            )
        )
        self._records: Records = (
            TransactionRecords(store) if transactional else WriteThroughRecords(store)
        )
        self._announcer = Announcer(
            topics,
            emitter,
            self.stats,
            self._metrics,
            flush_ms,
            transactional,
            wake=lambda stream_id: self._ownership.wake(stream_id),
        )
        self._views = Views(
            topics,
            transactional,
            wake=lambda stream_id: self._ownership.wake(stream_id),
            interval_ms=view_interval_ms,
        )
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
        self.health = health  # the outage guard: see `health_tick`
        if health is not None:
            self._metrics.registry.register(OutageCollector(lambda: health.outages))
        self._inputs.health = self._ownership.health = health

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
        """Partitions gone to another owner; a transactional engine checkpoints first."""
        self._ownership.on_revoked(partitions)

    def on_caught_up(self, partition: int) -> None:
        """`results` of `partition` are read up to where they stood when it was assigned."""
        self._ownership.on_caught_up(partition)

    @property
    def assigned(self) -> frozenset[int]:
        return frozenset(self._ownership.assigned)

    def partitions_to_tick(self, now_ms: int) -> list[int]:
        """Owned partitions that need a tick now: unbuilt, or with something due."""
        return self._ownership.partitions_to_tick(now_ms)

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
        for partition, stream_id in health.refresh(now_ms):
            if partition in self._ownership.assigned:
                self.index.set(partition, stream_id, 0)
        topic = self.topics.health
        for key, value in health.entries(now_ms):
            self.emitter.send(topic, key, value)

    # -- the transactional engine's hooks ------------------------------------------------

    def dirty(self, now_ms: int) -> bool:
        """Whether the next checkpoint has state to write (a tick can change a stream without
        any output: a collection, a requeue) or a deferred view to publish, so that the engine
        commits for it."""
        return self._records.dirty() or self._views.due(now_ms)

    def checkpoint(self, now_ms: int) -> None:
        """Called right before the engine commits a transaction: flush every stream's waiting
        windows in one commit, publish the view of every changed stream, and write every
        changed record to the store.

        At-least-once (Faust) everything is already written and sent: nothing to do.
        """
        if not self.transactional:
            return
        records, announcer = self._records, self._announcer
        out: list[Message] = []
        for stream_id in announcer.take_unflushed():
            built = len(out)
            try:
                record = records.peek(stream_id)
                if record is None or not record.state.unannounced:
                    continue
                announcer.flush(record, now_ms, out)
                records.save(stream_id, record, None)
            except InvalidInput:
                continue  # unreadable: logged, left alone
            except TidemarkError:
                raise
            except Exception as exc:
                del out[built:]  # nothing of a stream that failed goes out
                self._inputs.failed(stream_id, exc)
        views = self._views
        for stream_id, changed in records.changed():
            if changed is None:
                out.append(views.tombstone(stream_id))
                continue
            view = views.changed(changed, now_ms)
            if view is not None:
                out.append(view)
        for stream_id in views.take_due(now_ms):
            try:
                record = records.peek(stream_id)
            except InvalidInput:
                continue  # unreadable: logged, left alone
            if record is not None and record.view_owed and record.state.deleted_ms is None:
                view = views.message(record, now_ms)
                if view is not None:
                    out.append(view)
        send_all(self.emitter, out)
        for stream_id in records.checkpoint():
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
        self._ownership.reset()
