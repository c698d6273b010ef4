"""The `tidemark coordinator` process of the confluent engine: its topics, its engine, its
/health and /metrics endpoint, its consumer-lag reader, and the stop signals."""

from __future__ import annotations

import gc
import logging

from streams.coordinator.confluent.engine import GC_THRESHOLD, ConfluentEngine
from streams.coordinator.confluent.signals import (
    block_stop_signals,
    serve_stop_signals,
    stop_signal_within,
)
from streams.coordinator.confluent.web import HealthServer
from streams.coordinator.settings import CoordinatorSettings
from streams.coordinator.startup import STOPPED, prepare_topics_waiting, say_starting
from streams.coordinator.telemetry.lag import consumer_lag_collector
from streams.ports import cannot_listen

# What the coordinator's web port serves, and how to choose another (for the port's errors).
WEB_PORT = ("the coordinator's /health and /metrics", "--port or TIDEMARK_WEB_PORT")

log = logging.getLogger("streams.coordinator")
_LEVELS = {"crit": logging.CRITICAL, "error": logging.ERROR, "warn": logging.WARNING,
           "info": logging.INFO, "debug": logging.DEBUG}  # fmt: skip


def run_confluent(settings: CoordinatorSettings, loglevel: str = "info") -> None:
    """Run the confluent engine in the foreground until SIGTERM or Ctrl-C (stops within 10 s)."""
    logging.basicConfig(
        level=_LEVELS.get(loglevel.lower(), logging.INFO),
        format="[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s",
    )
    say_starting(settings, "confluent")
    try:
        _run(settings)
    finally:
        log.info(STOPPED)


def _run(settings: CoordinatorSettings) -> None:
    block_stop_signals()  # before any client starts a thread: see signals.py, beside this
    prepare_topics_waiting(settings, stop_signal_within)
    # The hot path allocates many short-lived objects and almost no cycles: collecting the
    # youngest generation every 50,000 allocations instead of 700 saves several per cent of
    # CPU (bench/processor_bench.py --gc-threshold shows how much) and costs a little memory.
    gc.set_threshold(GC_THRESHOLD, 20, 100)
    engine = ConfluentEngine(settings)
    serve_stop_signals(engine.request_stop)
    lag = consumer_lag_collector(settings.kafka, settings.topics)
    engine.metrics.registry.register(lag)
    try:
        web = HealthServer(
            settings.web_host, settings.web_port, engine.health, engine.metrics.registry
        ).start()
    except OSError as exc:  # taken since the CLI's check: the same one-line error
        raise cannot_listen(settings.web_host, settings.web_port, *WEB_PORT, exc) from None
    lag.start()
    try:
        engine.run()
    finally:
        lag.stop(timeout_s=1.0)
        web.stop()
