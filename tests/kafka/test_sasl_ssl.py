"""Tidemark against a SASL_SSL cluster: SCRAM-SHA-512 over TLS with a CA the test generates.

One broker of its own for the module, whose only client listener is SASL_SSL. Each engine's
coordinator, a worker, the CLI and the status page work against it with the KAFKA_* security
variables; a client without the right credentials is refused; and the password shows up in
no log line, no /health or /metrics, and no `--output json`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from streams.dev.broker import LocalBroker, SaslSsl, free_port
from tests.support.broker import sasl_ssl_broker
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Tail

# `make test-long`: a broker of its own, with certificates made for it (a minute or more).
pytestmark = [pytest.mark.broker, pytest.mark.long]


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    with sasl_ssl_broker(tmp_path_factory.mktemp("sasl-ssl")) as broker:
        yield broker


def _sasl(broker: LocalBroker) -> SaslSsl:
    assert broker.sasl_ssl is not None
    return broker.sasl_ssl


def _env(broker: LocalBroker, prefix: str, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
        "TIDEMARK_TOPIC_PREFIX": prefix,
        **_sasl(broker).environment(),
        # The CLI's first metadata call waits 6 s by default (tests/test_cli.py); a TLS handshake
        # and SCRAM to a broker of C1-only JIT took longer at load 38 (the cluster tests beside).
        "TIDEMARK_CONNECT_TIMEOUT_S": "30",
        **extra,
    }


def _wait(what: str, check: Callable[[], Any], timeout_s: float, log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}\n{tail}")


def _get(url: str) -> tuple[int, str] | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return None


@dataclass
class Service:
    """A `tidemark ...` process in the background, its output in a log file."""

    proc: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, args: list[str], env: dict[str, str], log: Path) -> Service:
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "streams", *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        return cls(proc, log)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _cli(
    env: dict[str, str], *args: str, timeout_s: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streams", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


@pytest.mark.parametrize("engine", ["confluent", "faust"])
def test_coordinator_worker_cli_and_status_page_over_sasl_ssl(
    secure: LocalBroker, engine: str, tmp_path: Path
) -> None:
    password = _sasl(secure).password
    prefix = f"sasl-{engine}-{uuid.uuid4().hex[:8]}"
    env = _env(secure, prefix)
    said: list[str] = []  # everything the processes printed or served, checked for the password
    coordinator = CoordinatorProcess(
        secure.settings, prefix, tmp_path / "data", tmp_path / "coordinator.log",
        engine=engine, env=_env(secure, prefix),
    )  # fmt: skip
    services: list[Service] = []
    tail: Tail | None = None
    try:
        health = coordinator.start().wait_ready(timeout_s=60)
        assert health["status"] == "ok"

        created = _cli(env, "--output", "json", "streams", "create", "s1", "--start", "now-20s",
                       "--window", "10s", "--step", "5s", "--timeout", "10s")  # fmt: skip
        said += [created.stdout, created.stderr]
        assert created.returncode == 0, created.stderr
        assert json.loads(created.stdout)["sent"]["stream_id"] == "s1"

        metrics_port = free_port()
        services.append(Service.start(
            ["worker", "--pipeline", "synthetic", "--prefix", prefix, "--grace-s", "2",
             "--port", str(metrics_port)], env, tmp_path / "worker.log"))  # fmt: skip
        tail = Tail(secure.settings, prefix, ["tasks", "results", "commits"], f"t-{prefix}")
        # 120 s: the first acked commit took more than 60 s once, on a machine at load 30 (two
        # other sessions running valgrind and brokers beside the suite); alone, the module
        # passes in 40 s.
        commit = tail.wait_for("a commit of an acked window of s1", lambda: [
            c for c in tail.values("commits", "s1")
            if any(w["reason"] == "ack" for w in c["windows"])], 120)[0]  # fmt: skip
        assert commit["downstream_ms"] > commit["previous_ms"]
        assert tail.values("tasks", "s1"), "the window was committed without a task"
        assert any(r["outcome"] == "ack" for r in tail.values("results", "s1"))

        listed = _cli(env, "--output", "json", "streams", "list")
        said += [listed.stdout, listed.stderr]
        assert listed.returncode == 0, listed.stderr
        assert "s1" in listed.stdout
        assert password not in json.dumps(json.loads(listed.stdout))
        status = _cli(env, "--output", "json", "status")
        said += [status.stdout, status.stderr]
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)

        page_port = free_port()
        services.append(Service.start(["dashboard", "--port", str(page_port), "--prefix", prefix],
                                      env, tmp_path / "dashboard.log"))  # fmt: skip
        page = f"http://127.0.0.1:{page_port}"
        ok = _wait("the status page's /healthz to say ok",
                   lambda: (r := _get(f"{page}/healthz")) and r[0] == 200 and r,
                   30, services[-1].log)  # fmt: skip
        state = _wait("s1 on the status page", lambda: (r := _get(f"{page}/api/state"))
                      and '"s1"' in r[1] and r, 30, services[-1].log)  # fmt: skip
        assert json.loads(state[1])["refresh_error"] is None
        worker_metrics = _get(f"http://127.0.0.1:{metrics_port}/metrics")
        assert worker_metrics is not None and worker_metrics[0] == 200
        assert "tidemark_" in worker_metrics[1]
        coordinator_health = _get(f"http://127.0.0.1:{coordinator.port}/health")
        coordinator_metrics = _get(f"http://127.0.0.1:{coordinator.port}/metrics")
        assert coordinator_health and coordinator_health[0] == 200
        assert coordinator_metrics and "tidemark_" in coordinator_metrics[1]
        said += [ok[1], state[1], worker_metrics[1], coordinator_health[1], coordinator_metrics[1]]
    finally:
        if tail is not None:
            tail.close()
        for service in services:
            service.stop()
        coordinator.stop()
    logs = {
        log.name: log.read_text(errors="replace")
        for log in [coordinator.log, *(s.log for s in services)]
    }
    # The logs checked below are the real ones: the worker's says it reached Kafka.
    assert "answered" in logs["worker.log"] and "serving pipeline" in logs["worker.log"]
    said += logs.values()
    assert all(password not in text for text in said), "the SASL password was printed or served"


def _refused(config: dict[str, Any], until: Callable[[list[KafkaError]], bool]) -> list[Any]:
    """Ask for metadata with `config` until librdkafka's reported errors satisfy `until`, within
    a deadline; every ask must fail. Returns the codes raised and the errors reported."""
    errors: list[KafkaError] = []
    raised: list[Any] = []
    full: dict[str, Any] = {**config, "error_cb": errors.append, "log_level": 0}
    client = AdminClient(full)
    deadline = time.monotonic() + 10
    while not (raised and until(errors)):
        assert time.monotonic() < deadline, f"not refused as expected: {raised} {errors}"
        with pytest.raises(KafkaException) as exc:
            client.list_topics(timeout=1)
        raised.append(exc.value.args[0].code())
        client.poll(0.1)  # serves error_cb
    return raised + errors


def _auth_failed(errors: list[KafkaError]) -> bool:
    return any(
        e.code() == KafkaError._AUTHENTICATION and "invalid credentials" in e.str() for e in errors
    )


def _down(errors: list[KafkaError]) -> bool:
    return any(e.code() == KafkaError._ALL_BROKERS_DOWN for e in errors)


@pytest.mark.parametrize(
    ("change", "until"),
    [
        pytest.param({"security.protocol": "PLAINTEXT"}, _down, id="plaintext"),
        pytest.param({"security.protocol": "SSL"}, _down, id="tls-without-sasl"),
        pytest.param({"sasl.password": "not-the-password"}, _auth_failed, id="wrong-password"),
        pytest.param({"sasl.username": "nobody"}, _auth_failed, id="unknown-user"),
    ],
)
def test_a_client_without_the_credentials_is_refused(
    secure: LocalBroker, change: dict[str, str], until: Callable[[list[KafkaError]], bool]
) -> None:
    config = secure.settings.librdkafka(**change)
    if config["security.protocol"] != "SASL_SSL":
        config = {k: v for k, v in config.items() if not k.startswith("sasl.")}
    seen = _refused(config, until)
    assert KafkaError._TRANSPORT in seen or KafkaError._TIMED_OUT in seen, seen


def test_the_cli_with_a_wrong_password_fails_in_time_and_prints_no_secret(
    secure: LocalBroker,
) -> None:
    password = _sasl(secure).password
    env = _env(secure, "sasl-refused", KAFKA_SASL_PASSWORD=password + "x")
    began = time.monotonic()
    done = _cli(env, "--connect-timeout", "3", "--output", "json", "streams", "list")
    assert done.returncode != 0
    assert "refused the credentials" in done.stdout + done.stderr
    assert time.monotonic() - began < 15
    assert password not in done.stdout + done.stderr  # nor the wrong one, which starts alike
