"""One KRaft node (broker and controller in one JVM) from the Maven jars, run with `java`.

Alone it is the development broker and the test session's broker; several of them, sharing one
`controller.quorum.voters` list, make a cluster (streams.dev.broker.cluster).
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from streams.dev.broker.jars import (
    JARS_DIR,
    KAFKA_VERSION,
    ROOT,
    fetch_jars,
    jars_dir_for,
    java,
    marked_version,
)
from streams.dev.broker.ports import free_port, port_taken
from streams.dev.broker.tls import SaslSsl
from streams.dev.broker.versions import extra_properties, format_features, log_config
from streams.errors import BrokerUnavailable
from streams.kafka.admin import wait_ready
from streams.kafka.settings import KafkaSettings

DEV_HOME = ROOT / ".data" / "kafka"
DEV_PORT = 9092
DEV_CONTROLLER_PORT = 9093

_PROPERTIES = """\
process.roles=broker,controller
node.id={node_id}
controller.quorum.voters={voters}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={log_dirs}
num.partitions=1
# Internal topics at the cluster's replication: on one node that is 1, or transactions hang
# (the transaction log's min ISR defaults to 2).
offsets.topic.replication.factor={replication}
offsets.topic.num.partitions=6
transaction.state.log.replication.factor={replication}
transaction.state.log.min.isr={min_insync}
transaction.state.log.num.partitions=6
default.replication.factor={replication}
min.insync.replicas={min_insync}
# Topics are created by the application with their partition counts: co-partitioning depends
# on it, and an auto-created topic would make Faust fail with PartitionsMismatch.
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=4
log.cleaner.dedupe.buffer.size=16777216
log.segment.bytes=67108864
log.retention.check.interval.ms=60000
"""


# What SASL_SSL mode puts in place of the PLAINTEXT listener lines of _PROPERTIES.
_SASL_SSL_PROPERTIES = """\
listeners=SASL_SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=SASL_SSL://127.0.0.1:{port}
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms={mechanism}
sasl.mechanism.inter.broker.protocol={mechanism}
listener.name.sasl_ssl.{mechanism_lower}.sasl.jaas.config={jaas}
ssl.keystore.type=PKCS12
ssl.keystore.location={keystore}
ssl.keystore.password={keystore_password}
ssl.key.password={keystore_password}
ssl.truststore.type=PEM
ssl.truststore.location={ca_pem}
ssl.endpoint.identification.algorithm=https
"""


def new_cluster_id() -> str:
    """A random 22-character base64 cluster id, never starting with "-" (which the storage
    tool's argument parser would take for an option, as Kafka's own random-uuid avoids too)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass
class LocalBroker:
    """One KRaft node that is broker and controller, with its data and logs under `home`.

    Alone (the defaults) it is a cluster of one: its own voter, replication 1. A node of a
    LocalCluster gets its `node_id`, the shared `voters` list and `cluster_id`, and the
    cluster's replication.
    """

    home: Path
    port: int
    controller_port: int
    jars_dir: Path = JARS_DIR
    sasl_ssl: SaslSsl | None = None  # None: the PLAINTEXT listener of the development broker
    node_id: int = 1
    voters: str = ""  # controller.quorum.voters; "" for this node alone
    cluster_id: str = ""  # "" for a new random one when the storage is first formatted
    replication: int = 1  # default.replication.factor and the internal topics'
    min_insync: int = 1  # min.insync.replicas and transaction.state.log.min.isr
    heap_mb: int = 512
    # Quick start: the client compiler only (C1) and the serial collector. A node starts in
    # about half the time (4-5 s against 8-10 s, 2 cores) and compiles less while tests load
    # the machine, at some cost in peak throughput; benchmarks ask for the full JIT and G1.
    quick_start: bool = True
    # The Kafka version of `jars_dir`; "" for the one its jars are, else KAFKA_VERSION.
    kafka_version: str = ""
    # Detached: the JVM is not this process's child (a shell starts it and exits), so a test
    # that restarts a node leaves no child process of its own behind (tests/conftest.py).
    detach: bool = False
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def settings(self) -> KafkaSettings:
        """How a client reaches this broker, with the credentials of its SASL_SSL listener."""
        security = self.sasl_ssl.security() if self.sasl_ssl else {}
        return KafkaSettings(self.bootstrap_servers, security)

    @property
    def version(self) -> str:
        return self.kafka_version or marked_version(self.jars_dir) or KAFKA_VERSION

    @property
    def pid_file(self) -> Path:
        return self.home / "broker.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "server.log"

    def _write_config(self) -> Path:
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        props = self.home / "server.properties"
        text = _PROPERTIES.format(
            node_id=self.node_id,
            voters=self.voters or f"{self.node_id}@127.0.0.1:{self.controller_port}",
            port=self.port,
            controller_port=self.controller_port,
            log_dirs=(self.home / "data").resolve(),
            replication=self.replication,
            min_insync=self.min_insync,
        ) + extra_properties(self.version)
        if self.sasl_ssl is not None:
            sasl, certs = self.sasl_ssl, self.sasl_ssl.certificates
            secure = _SASL_SSL_PROPERTIES.format(
                port=self.port,
                controller_port=self.controller_port,
                mechanism=sasl.mechanism,
                mechanism_lower=sasl.mechanism.lower(),
                jaas="org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{sasl.username}" password="{sasl.password}";',
                keystore=certs.keystore.resolve(),
                keystore_password=certs.keystore_password,
                ca_pem=certs.ca_pem.resolve(),
            )
            keys = {line.split("=", 1)[0] for line in secure.splitlines()}
            kept = [line for line in text.splitlines() if line.split("=", 1)[0] not in keys]
            text = "\n".join(kept) + "\n" + secure
        props.write_text(text)
        props.chmod(0o600)  # it holds the SCRAM and keystore passwords
        log_name, log_text, _ = log_config(self.version, self.log_file.resolve())
        (self.home / log_name).write_text(log_text)
        return props

    def _java_cmd(self, main: str, *args: str) -> list[str]:
        name, _, flag = log_config(self.version, self.log_file)
        if self.quick_start:
            jvm = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
        else:
            jvm = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"]
        return [
            java(), f"-Xms{min(256, self.heap_mb)}m", f"-Xmx{self.heap_mb}m",
            *jvm, "-Djava.awt.headless=true",
            f"{flag}=file:{(self.home / name).resolve()}",
            f"-Dkafka.logs.dir={(self.home / 'logs').resolve()}",
            "-cp", f"{self.jars_dir.resolve()}/*", main, *args,
        ]  # fmt: skip

    def running_pid(self) -> int | None:
        """The pid of this broker's JVM if it is alive (checked against its command line)."""
        try:
            pid = int(self.pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return None
        return pid if b"kafka.Kafka" in cmdline and _alive(pid) else None

    def launch(self) -> int:
        """Format the storage if needed and start the JVM; return its pid without waiting."""
        if self.running_pid() is not None:
            raise BrokerUnavailable(f"a broker from {self.home} is already running")
        for port in (self.port, self.controller_port):
            if port_taken(port):
                raise BrokerUnavailable(f"port {port} on 127.0.0.1 is taken by another process")
        fetch_jars(self.jars_dir, self.version)
        props = self._write_config()
        if not (self.home / "data" / "meta.properties").exists():
            cluster_id = self.cluster_id or new_cluster_id()
            fmt = self._java_cmd(
                "kafka.tools.StorageTool",
                "format",
                "-t",
                cluster_id,
                "-c",
                str(props),
                "-g",
                *format_features(self.version),
            )
            if self.sasl_ssl is not None:
                fmt += ["--add-scram", self.sasl_ssl.add_scram_argument()]
            done = subprocess.run(fmt, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise BrokerUnavailable(f"formatting Kafka storage failed:\n{done.stderr}")
        cmd = self._java_cmd("kafka.Kafka", str(props))
        stdout_log = self.home / "logs" / "stdout.log"
        if self.detach:
            pid, self._proc = _spawn_detached(cmd, stdout_log), None
        else:
            with open(stdout_log, "ab") as out:
                self._proc = subprocess.Popen(
                    cmd,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # Ctrl-C in a terminal goes to us, not the broker
                )
            pid = self._proc.pid
        self.pid_file.write_text(str(pid))
        return pid

    def wait_ready(self, timeout_s: float = 90.0) -> None:
        """Wait until this node answers a metadata request; raise if its JVM ends first."""
        deadline = time.monotonic() + timeout_s
        settings = self.settings
        while True:
            ended = self._ended()
            if ended is not None:
                self.pid_file.unlink(missing_ok=True)
                raise BrokerUnavailable(
                    f"the broker {ended}; see {self.log_file}:\n" + self.log_tail()
                )
            try:
                wait_ready(settings, timeout_s=min(5.0, max(0.1, deadline - time.monotonic())))
                return
            except BrokerUnavailable:
                if time.monotonic() >= deadline:
                    self.stop()
                    raise BrokerUnavailable(
                        f"the broker did not answer within {timeout_s:g} s; log tail:\n"
                        + self.log_tail()
                    ) from None

    def start(self, timeout_s: float = 90.0) -> None:
        """Format storage if needed, start the JVM detached, and wait for a metadata answer."""
        self.launch()
        self.wait_ready(timeout_s)

    def _ended(self) -> str | None:
        """How the JVM ended, if it has."""
        if self._proc is not None:
            code = self._proc.poll()
            return None if code is None else f"exited with code {code}"
        return None if self.running_pid() is not None else "exited"

    def stop(self, timeout_s: float = 30.0) -> bool:
        """SIGTERM, then SIGKILL after `timeout_s`; return whether a broker was running."""
        pid = self.terminate()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        deadline = time.monotonic() + timeout_s
        try:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        except BaseException:  # interrupted (a second Ctrl-C): never leave the JVM behind
            os.kill(pid, signal.SIGKILL)
            raise
        if _alive(pid):
            self.kill()
        self.pid_file.unlink(missing_ok=True)
        return True

    def terminate(self) -> int | None:
        """SIGTERM without waiting; return the pid it went to, None if none was running."""
        pid = self.running_pid()
        if pid is not None:
            os.kill(pid, signal.SIGCONT)  # a paused JVM would not act on the SIGTERM
            os.kill(pid, signal.SIGTERM)
        return pid

    def kill(self) -> bool:
        """SIGKILL, as a crash: no controlled shutdown. Return whether a broker was running."""
        pid = self.running_pid()
        if pid is None:
            return False
        os.kill(pid, signal.SIGKILL)
        while _alive(pid):
            time.sleep(0.05)
        self.pid_file.unlink(missing_ok=True)
        return True

    def pause(self) -> None:
        """SIGSTOP: the JVM hangs (as in a long GC pause or a frozen VM) with its sockets open."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after pause()."""
        self._signal(signal.SIGCONT)

    def _signal(self, sig: signal.Signals) -> None:
        pid = self.running_pid()
        if pid is None:
            raise BrokerUnavailable(f"no broker from {self.home} is running")
        os.kill(pid, sig)

    def log_tail(self, lines: int = 30) -> str:
        text = ""
        for f in (self.log_file, self.home / "logs" / "stdout.log"):
            if f.exists():
                text += "\n".join(f.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text


def _spawn_detached(cmd: list[str], stdout_log: Path) -> int:
    """Start `cmd` in a new session through a shell that exits at once; return its pid."""
    shell = 'exec "$@" </dev/null >>"$TIDEMARK_BROKER_LOG" 2>&1 & echo $!'
    done = subprocess.run(
        ["/bin/sh", "-c", shell, "sh", *cmd],
        env={**os.environ, "TIDEMARK_BROKER_LOG": str(stdout_log)},
        capture_output=True,
        text=True,
        check=True,
        start_new_session=True,
    )
    return int(done.stdout.strip())


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):  # reap our own child: a zombie is not alive
        os.waitpid(pid, os.WNOHANG)
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def dev_broker() -> LocalBroker:
    return LocalBroker(DEV_HOME, DEV_PORT, DEV_CONTROLLER_PORT)


def ephemeral_broker(
    home: Path,
    sasl_ssl: SaslSsl | None = None,
    version: str | None = None,
    quick_start: bool = True,
) -> LocalBroker:
    """A broker on free ports; `version` None for KAFKA_VERSION (its jars fetched on launch)."""
    if version is None:
        return LocalBroker(home, free_port(), free_port(), sasl_ssl=sasl_ssl,
                           quick_start=quick_start)  # fmt: skip
    jars_dir = jars_dir_for(version)
    return LocalBroker(home, free_port(), free_port(), jars_dir, sasl_ssl, kafka_version=version,
                       quick_start=quick_start)  # fmt: skip
