"""``run_worker``: one worker process from start to exit, around a ``WorkerRuntime``.

It builds the pipeline's handler, waits for the broker (retrying with backoff and saying so,
never hanging silently), announces its pipeline in the registry while it runs
(streams.worker.registry), serves ``/metrics`` and ``/health`` if asked, turns SIGTERM and
SIGINT into a graceful ``stop()`` (a second signal exits at once), runs the loop and returns
an exit code.

A broker outage, however long, does not end the worker: its clients retry, and one
``BrokerWatch`` (streams.kafka.reachability), fed at start-up by the wait for the broker and
then by the task source, tells ``/health`` (``{"status": "waiting_for_brokers", ...}``) and the
log (a WARNING a minute) that it waits, since when and on what error.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import FrameType
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import REGISTRY, CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from streams import clock
from streams.core.config import DEFAULT_PIPELINE
from streams.errors import BrokerUnavailable
from streams.handler import AnyHandler
from streams.kafka.admin import partition_counts, wait_ready
from streams.kafka.pipelines import ensure_tasks_topic
from streams.kafka.reachability import BrokerWatch
from streams.kafka.registry import KafkaRegistryPublisher, ensure_registry_topic
from streams.kafka.settings import KafkaSettings
from streams.kafka.worker_io import KafkaResultSink, KafkaTaskSource
from streams.pipelines import build_pipeline
from streams.ports import cannot_listen
from streams.topics import Topics
from streams.worker.config import WorkerConfig
from streams.worker.registry import Announcement, RegistryAnnouncer
from streams.worker.runtime import WorkerRuntime

log = logging.getLogger("streams.worker")

MAX_BACKOFF_S = 30.0
# Beyond the grace and flush timeouts, how long a stop may take before the process exits.
STOP_MARGIN_S = 5.0


def run_worker(
    config: WorkerConfig,
    *,
    options: Mapping[str, Any] | None = None,
    settings: KafkaSettings | None = None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    registry: CollectorRegistry | None = None,
) -> int:
    """Run a worker until SIGTERM or SIGINT; return 0 on a clean exit, else 1.

    ``options`` go to ``build_pipeline``. A bad option raises ``InvalidInput``, a metrics port
    that cannot be served ``PortUnavailable``, both before any connection is made.
    ``settings`` default to the environment (``KafkaSettings.from_env``). Signal handlers are
    installed only when called from the main thread.
    """
    handler = build_pipeline(config.pipeline, **dict(options or {}))
    settings = settings or KafkaSettings.from_env()
    brokers = BrokerWatch()
    stopping = threading.Event()
    runtime: WorkerRuntime | None = None

    def request_stop() -> None:
        stopping.set()
        if runtime is not None:
            runtime.stop()

    try:
        deadline_s = config.grace_s + config.flush_timeout_s + STOP_MARGIN_S
        with (
            _signals_stop(request_stop, deadline_s),
            _metrics_server(metrics_port, metrics_host, registry, brokers),
        ):
            if not _wait_for_broker(settings, config, stopping, brokers):
                return 0
            runtime = kafka_runtime(settings, handler, config, registry=registry, brokers=brokers)
            if stopping.is_set():  # a signal came while the runtime was being built
                runtime.stop()
            announcer = RegistryAnnouncer(
                Announcement.of(config, handler),
                KafkaRegistryPublisher(settings, Topics(config.topic_prefix)),
            )
            announcer.start()
            try:
                runtime.run()
            finally:  # a failed worker's entry goes stale: it did not stop cleanly
                announcer.stop(clean=not runtime.failed)
            return 1 if runtime.failed else 0
    finally:
        close = getattr(handler, "close", None)  # e.g. the metrics pipeline's HTTP pool
        if callable(close):
            close()


def kafka_runtime(
    settings: KafkaSettings,
    handler: AnyHandler,
    config: WorkerConfig,
    *,
    registry: CollectorRegistry | None = None,
    brokers: BrokerWatch | None = None,
) -> WorkerRuntime:
    """A runtime whose tasks and results go through Kafka (``streams.kafka.worker_io``)."""
    source = KafkaTaskSource(settings, config, brokers)
    sink = KafkaResultSink(settings, config)
    return WorkerRuntime(handler, config, source, sink, registry=registry)


def _give_up(deadline_s: float) -> None:
    log.error(
        "could not stop cleanly within %g s (is the broker reachable?); exiting without "
        "committing: those tasks will be done again",
        deadline_s,
    )
    logging.shutdown()
    os._exit(1)


def _wait_for_broker(
    settings: KafkaSettings,
    config: WorkerConfig,
    stopping: threading.Event,
    watch: BrokerWatch | None = None,
) -> bool:
    """Wait until a broker answers, retrying with backoff; False if stopped meanwhile."""
    watch = watch or BrokerWatch()
    backoff_s = 1.0
    while not stopping.is_set():
        try:
            brokers = wait_ready(settings, timeout_s=5.0)
        except BrokerUnavailable as exc:
            watch.unreachable(clock.now_ms(), str(exc))
            log.error("%s; retrying in %g s", exc, backoff_s)
            stopping.wait(backoff_s)
            backoff_s = min(backoff_s * 2, MAX_BACKOFF_S)
            continue
        watch.reachable(clock.now_ms())
        log.info("Kafka at %s answered (%d brokers); serving pipeline %r from %s",
                 settings.bootstrap_servers, brokers, config.route, config.tasks_topic)  # fmt: skip
        _check_topics(settings, config)
        return True
    return False


def _check_topics(settings: KafkaSettings, config: WorkerConfig) -> None:
    """Make the tasks topic of a named pipeline (as the CLI and the coordinator would: whoever
    comes first), and say so if a topic is missing: the worker would otherwise wait without a
    word. The default pipeline's topic is the coordinator's own, made with the others."""
    if config.route != DEFAULT_PIPELINE:
        try:
            ensure_tasks_topic(settings, Topics(config.topic_prefix), config.route)
        except BrokerUnavailable as exc:  # e.g. no right to create topics: someone else will
            log.warning("could not make %s: %s", config.tasks_topic, exc)
    try:  # the registry, on a deployment older than it
        ensure_registry_topic(settings, Topics(config.topic_prefix))
    except BrokerUnavailable as exc:
        log.warning("could not make the pipelines registry topic: %s", exc)
    topics = [config.tasks_topic, config.results_topic]
    try:
        found = partition_counts(settings, topics)
    except BrokerUnavailable as exc:
        log.warning("could not list topics: %s", exc)
        return
    for topic in topics:
        if topic not in found:
            log.warning("topic %s does not exist yet; the worker waits for it", topic)


@contextmanager
def _signals_stop(
    request_stop: Callable[[], None], deadline_s: float | None = None
) -> Iterator[None]:
    """SIGTERM and SIGINT call ``request_stop`` once; a second one exits the process at once.

    With ``deadline_s``, a stop that has not finished by then (the final commit needs the
    broker, and a broker that stopped answering holds it for minutes) exits the process with
    status 1: tasks whose offsets were not committed are simply done again (at least once).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGTERM, signal.SIGINT)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("%s: stopping (again to exit at once)", signal.Signals(signum).name)
        for sig in signals:
            signal.signal(sig, signal.SIG_DFL)
        if deadline_s is not None:
            timer = threading.Timer(deadline_s, _give_up, args=(deadline_s,))
            timer.daemon = True
            timer.start()
        request_stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # scrapes are not news
        pass


def health_app(brokers: BrokerWatch, metrics: Callable[..., Iterable[bytes]]) -> Any:
    """A WSGI app: ``/health`` says whether the worker reaches Kafka, anything else is
    ``metrics``. Always 200: a worker waiting for the brokers is alive and will resume, and a
    liveness probe that restarted it would only bring a new client that waits the same."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/health":
            return metrics(environ, start_response)
        state = brokers.health(clock.now_ms())
        doc = {"status": "ok" if state["kafka"] == "ok" else "waiting_for_brokers", **state}
        body = json.dumps(doc).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]

    return app


@contextmanager
def _metrics_server(
    port: int | None,
    host: str,
    registry: CollectorRegistry | None,
    brokers: BrokerWatch | None = None,
) -> Iterator[None]:
    """Serve ``/metrics`` and ``/health`` on ``host:port`` while the worker runs (nothing if
    ``port`` is None)."""
    if port is None:
        yield
        return
    app = health_app(brokers or BrokerWatch(), make_wsgi_app(registry or REGISTRY))
    try:
        server = make_server(host, port, app, ThreadingWSGIServer, handler_class=_Quiet)
    except OSError as exc:
        raise cannot_listen(
            host, port, "the worker's /metrics and /health", "--port", exc
        ) from None
    thread = threading.Thread(target=server.serve_forever, name="worker-http", daemon=True)
    thread.start()
    log.info("serving metrics on http://%s:%d/metrics (and /health)", host, server.server_port)
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
