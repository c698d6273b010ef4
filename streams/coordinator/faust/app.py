"""The Faust app: a RocksDB table of stream records, one agent, and a ticking timer.

The only module that imports Faust. It feeds every event of `control`, `results` and `ticks`
to the Processor in the event's own context, so that table writes land in the event's
partition (which is the stream's partition, checked by the Processor).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import threading
import time
from collections.abc import Iterable
from typing import Any

import faust  # noqa: TID251  (the Faust engine)
from faust.types import TP  # noqa: TID251
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from streams.buildinfo import BuildInfoCollector
from streams.coordinator.catchup import CatchUp
from streams.coordinator.faust.brokers import QUIET_MS, OutageLogFilter, say_waiting
from streams.coordinator.faust.outbox import OutboxDelivery
from streams.coordinator.faust.store import TableStore
from streams.coordinator.guard import guard
from streams.coordinator.limits_table import limits_table
from streams.coordinator.pipelines import TasksTopicGuard, tasks_topic_ensurer
from streams.coordinator.processor import Processor
from streams.coordinator.settings import CoordinatorSettings
from streams.coordinator.startup import STOPPED, prepare_topics_waiting, say_starting
from streams.coordinator.telemetry.lag import consumer_lag_collector
from streams.coordinator.telemetry.metrics import CoordinatorMetrics
from streams.errors import TidemarkError
from streams.kafka.lag import backlog
from streams.kafka.output import KafkaOutput
from streams.kafka.reachability import BrokerWatch

log = logging.getLogger("streams.coordinator")

# faust and aiokafka build DEBUG records per message even when the level is higher; about a
# tenth of the CPU went there in a profile (../shared/guide/faust-notes.md).
_NOISY = ("aiokafka", "aiokafka.producer", "aiokafka.consumer", "faust.topics", "faust.transport")


BATCH_MAX = 500
BATCH_WITHIN_S = 0.005


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _credentials(settings: CoordinatorSettings) -> Any:
    sec = settings.kafka.security
    protocol = sec.get("security.protocol", "PLAINTEXT").upper()
    context = None
    if protocol.endswith("SSL"):
        context = ssl.create_default_context(cafile=sec.get("ssl.ca.location"))
        if sec.get("ssl.certificate.location"):
            context.load_cert_chain(
                sec["ssl.certificate.location"],
                sec.get("ssl.key.location"),
                sec.get("ssl.key.password"),
            )
    if protocol.startswith("SASL"):
        return faust.SASLCredentials(
            username=sec.get("sasl.username"),
            password=sec.get("sasl.password"),
            mechanism=sec.get("sasl.mechanism", "PLAIN"),
            ssl_context=context,
        )
    return faust.SSLCredentials(context) if context else None


class CoordinatorApp(faust.App):
    """A Faust app whose pre-commit producer flush also flushes the outputs' producer.

    Faust commits input offsets only after `app.producer.flush()`; the coordinator's outputs go
    through a confluent-kafka producer (streams.kafka.output), so that flush must cover it too
    for an input to be committed only once what it emitted was delivered.
    """

    output: KafkaOutput | None = None
    # Whether aiokafka reaches the brokers (brokers.py, beside this), for /health and logs.
    brokers: BrokerWatch | None = None

    def _new_producer(self) -> Any:
        producer = super()._new_producer()
        faust_flush = producer.flush

        async def flush() -> None:
            await faust_flush()
            if self.output is not None:
                await self.output.flush()

        producer.flush = flush  # type: ignore[method-assign]
        return producer


def build_app(settings: CoordinatorSettings) -> tuple[faust.App, Processor]:
    for name in _NOISY:
        logging.getLogger(name).setLevel(logging.WARNING)
    brokers = BrokerWatch(quiet_ms=QUIET_MS)
    OutageLogFilter(brokers).install()
    t = settings.topics
    app = CoordinatorApp(
        t.app_id,
        broker=f"kafka://{settings.kafka.bootstrap_servers}",
        broker_credentials=_credentials(settings),
        store="rocksdb://",
        datadir=str(settings.data_dir),
        topic_partitions=settings.partitions,
        # What prepare_topics chose; Faust creates only its own leader topic with it.
        topic_replication_factor=settings.replication or 1,
        processing_guarantee="at_least_once",  # exactly_once is not dependable in Faust
        consumer_auto_offset_reset="earliest",
        broker_commit_interval=0.5,
        # A coordinator that died is noticed after this long and its partitions move on.
        broker_session_timeout=settings.session_timeout_ms / 1000,
        broker_heartbeat_interval=min(3.0, settings.session_timeout_ms / 3000),
        producer_linger_ms=5,
        producer_max_batch_size=1_048_576,
        web_enabled=True,
        web_bind=settings.web_host,
        web_host=settings.web_host,
        web_port=settings.web_port,
        web_tables_enabled=False,
        web_router_enabled=False,
    )

    def table(name: str, cache_mb: int) -> Any:
        return app.Table(
            name,
            partitions=settings.partitions,
            key_type=bytes,  # bytes means the "raw" serializer: records are our own JSON
            value_type=bytes,
            # One RocksDB per partition; the default block cache (2 GiB each) is for big servers.
            options={
                "driver": "rocksdict",
                "block_cache_size": cache_mb * 1024 * 1024,
                "write_buffer_size": 16 * 1024 * 1024,
            },
        )

    app.brokers = brokers
    metrics = CoordinatorMetrics(
        top_laggards=settings.top_laggards, behind_threshold_s=settings.behind_threshold_s
    )
    metrics.registry.register(BuildInfoCollector(engine="faust"))
    app.output = output = KafkaOutput(settings.kafka)
    source_health, health_table = guard(settings)
    sources_table, source_limits = limits_table(settings)
    ensure = tasks_topic_ensurer(settings, aborts=False)  # a pipeline's topic, on first use
    processor = Processor(
        t,
        settings.partitions,
        TableStore(table("streams", 64)),
        TasksTopicGuard(t, output, ensure),
        settings.flush_ms,
        replay_store=TableStore(table("replays", 8)),
        replay_concurrency=settings.replay_concurrency,
        metrics=metrics,
        # takeover grace: deadlines count once `results` are read (at most a session later)
        catch_up_max_ms=settings.catch_up_max_ms,
        health=source_health,
        source_limits=source_limits,
        delivery=OutboxDelivery(),  # the unit of work: an outbox with delivery confirmations
    )
    catch_up = CatchUp(processor.on_caught_up)
    inputs = app.topic(
        t.control, t.results, t.ticks,
        key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw",
        partitions=settings.partitions,
    )  # fmt: skip
    ticks = app.topic(t.ticks, key_serializer="raw", value_serializer="raw")

    @app.agent(inputs, concurrency=1)  # one at a time: it writes the table
    async def coordinate(stream: Any) -> None:
        # Events come in batches (acked after the whole batch), which saves Faust's per-event
        # agent overhead; each one is handled in its own event context, because the table
        # writes it makes must land in its partition's changelog.
        async for events in stream.take_events(BATCH_MAX, within=BATCH_WITHIN_S):
            if processor.unbuilt:  # no event context needed: a rebuild writes no table
                await rebuild()
            # Faust's own task that fills the take buffer may have run during that await, set
            # the stream's current event and be waiting to read it back: it gets it back below.
            theirs = stream.current_event
            now = now_ms()
            brokers.reachable(now)  # a record came: a broker answers
            for event in events:
                stream._set_current_event(event)
                m = event.message
                try:
                    processor.on_message(m.topic, m.partition, m.offset, m.key, m.value, now)
                except Exception:  # a bug must not stop the coordinator; the input is logged
                    log.exception("failed on %s[%d]@%d; skipped", m.topic, m.partition, m.offset)
            stream._set_current_event(theirs)
            if catch_up.pending:
                for event in events:
                    m = event.message
                    if m.topic == t.results:
                        catch_up.reached(m.partition, m.offset + 1)

    async def rebuild() -> None:
        """Index the unbuilt partitions a slice at a time, before a batch holding their inputs
        or ticks (which would index them at once): the event loop, and so the group's
        heartbeats, runs between slices."""
        while processor.unbuilt:  # again if a rebalance voided it
            for _ in processor.building(now_ms()):
                await asyncio.sleep(0)

    def owned(tps: Iterable[TP]) -> set[int]:
        """A stream's partition is owned with its inputs (ticks are co-assigned, not the cause)."""
        return {tp.partition for tp in tps if tp.topic in (t.control, t.results)}

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]  # mode types receivers oddly
    def on_revoked(sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        partitions = owned(args[0])
        processor.on_revoked(partitions)
        catch_up.forget(partitions)

    @app.on_partitions_assigned.connect  # type: ignore[arg-type]
    def on_assigned(sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        partitions = owned(args[0])
        processor.on_assigned(partitions)
        generation = catch_up.assigned()
        loop = app.loop

        def read_backlog() -> None:  # off the event loop: it waits on the broker
            try:
                found = backlog(settings.kafka, t.app_id, t.results, partitions)
            except TidemarkError as exc:
                log.warning("%s; deadlines count again within a session timeout", exc)
                return
            for p, (resume_at, end) in found.items():
                loop.call_soon_threadsafe(catch_up.expect, generation, p, resume_at, end)

        threading.Thread(target=read_backlog, name="results-backlog", daemon=True).start()

    @app.timer(interval=settings.tick_interval_ms / 1000)  # type: ignore[untyped-decorator]
    async def tick() -> None:
        say_waiting(brokers, log, now_ms())  # a WARNING a minute through a broker outage
        output.poll()  # serve delivery callbacks
        if app.rebalancing:
            return
        processor.health_tick(now_ms())  # no table write: the counts go out by the output
        for p in processor.partitions_to_tick(now_ms()):
            await ticks.send(key=None, value=b"tick", partition=p)

    @app.page("/health")
    async def health(web: Any, request: Any) -> Any:
        kafka = brokers.health(now_ms())
        status = "rebalancing" if app.rebalancing else "ok"
        return web.json(
            {
                "status": status if kafka["kafka"] == "ok" else "waiting_for_brokers",
                **kafka,
                "partitions": sorted(processor.assigned),
                "indexed_streams": len(processor.index),
                "stats": dict(processor.stats),
            }
        )

    lag = consumer_lag_collector(settings.kafka, t)
    metrics.registry.register(lag)

    @app.task  # type: ignore[untyped-decorator]  # at start-up, after recovery
    async def start_consumer_lag() -> None:
        lag.start()
        health_table.start()
        sources_table.start()

    @app.on_before_shutdown.connect  # type: ignore[arg-type]
    def stop_consumer_lag(sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        lag.stop(timeout_s=1.0)  # a refresh still running ends with the process
        health_table.stop()
        sources_table.stop()

    @app.page("/metrics")
    async def prometheus_metrics(web: Any, request: Any) -> Any:
        body = generate_latest(metrics.registry)  # O(streams): no table reads
        return web.bytes(body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    return app, processor


# A clean stop flushes outputs and commits offsets, which needs the broker. When it cannot be
# done within this long (the broker is gone), the process exits anyway: the table is already
# written and uncommitted inputs are processed again on restart (at-least-once).
STOP_DEADLINE_S = 8.0


class CoordinatorWorker(faust.Worker):
    """Faust's worker, with a deadline on stopping after SIGTERM or Ctrl-C, that says what
    starts once its logging is set up (its first start)."""

    tidemark: CoordinatorSettings | None = None  # what `run` starts, for the first line

    async def on_first_start(self) -> None:
        await super().on_first_start()  # sets up logging
        if self.tidemark is not None:
            say_starting(self.tidemark, "faust")

    def _on_sigterm(self) -> None:
        self._arm_stop_deadline()
        super()._on_sigterm()

    def _on_sigint(self) -> None:
        self._arm_stop_deadline()
        super()._on_sigint()

    def _arm_stop_deadline(self) -> None:
        if getattr(self, "_stop_deadline", None) is not None:
            return

        def give_up() -> None:
            log.error(
                "could not stop cleanly within %g s (is the broker reachable?); exiting "
                "without committing: inputs since the last commit are processed again",
                STOP_DEADLINE_S,
            )
            logging.shutdown()
            os._exit(1)

        self._stop_deadline = threading.Timer(STOP_DEADLINE_S, give_up)
        self._stop_deadline.daemon = True
        self._stop_deadline.start()


def run(settings: CoordinatorSettings, loglevel: str = "info") -> None:
    """Run a coordinator in the foreground until SIGTERM or Ctrl-C (stops within 10 s)."""
    settings = prepare_topics_waiting(settings)  # with the replication the cluster chose
    app, _ = build_app(settings)
    worker = CoordinatorWorker(app, loglevel=loglevel, quiet=True)
    worker.tidemark = settings
    try:
        worker.execute_from_commandline()
    finally:
        log.info(STOPPED)
