"""The worker's /health (beside /metrics): whether it reaches Kafka, and what it waits for."""

from __future__ import annotations

import json
import urllib.request

from prometheus_client import CollectorRegistry, Counter

from streams import clock
from streams.dev.broker import free_port
from streams.kafka.reachability import BrokerWatch
from streams.worker.runner import _metrics_server


def _get(port: int, path: str) -> tuple[int, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        return response.status, response.read().decode()


def test_health_says_waiting_for_brokers_with_since_and_error_and_metrics_still_served() -> None:
    registry = CollectorRegistry()
    Counter("tidemark_test_total", "a test counter", registry=registry).inc()
    brokers, port = BrokerWatch(), free_port()
    with _metrics_server(port, "127.0.0.1", registry, brokers):
        assert _get(port, "/health") == (200, json.dumps({"status": "ok", "kafka": "ok"}))
        since_ms = clock.now_ms() - 90_000
        brokers.unreachable(since_ms, "1/1 brokers are down")
        status, body = _get(port, "/health")
        doc = json.loads(body)
        assert status == 200  # alive: a restart would wait the same
        assert doc["status"] == doc["kafka"] == "waiting_for_brokers"
        assert doc["kafka_waiting_since_ms"] == since_ms
        assert 90 <= doc["kafka_waited_s"] < 100
        assert doc["kafka_last_error"] == "1/1 brokers are down"
        assert "tidemark_test_total 1.0" in _get(port, "/metrics")[1]
        brokers.reachable(clock.now_ms())
        assert json.loads(_get(port, "/health")[1])["status"] == "ok"
