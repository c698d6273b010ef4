"""A real Apache Kafka 3.9.2 broker (KRaft, one node) from Maven Central jars, run with `java`.

One launcher, three uses: `make kafka` / `make kafka-stop` (a development broker on
127.0.0.1:9092), the pytest session fixture (an ephemeral broker on free ports), and `make run`.

    python -m streams.devbroker fetch    # download the jars once (Maven, into .kafka/jars)
    python -m streams.devbroker start    # start the dev broker in the background, wait until ready
    python -m streams.devbroker stop     # stop it; no process is left behind
    python -m streams.devbroker status

`LocalBroker(..., sasl_ssl=SaslSsl(...))` starts it with one SASL_SSL listener (SCRAM-SHA-512,
TLS from `make_certificates`, made with the JDK's keytool) instead of the PLAINTEXT one.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from streams.errors import BrokerUnavailable
from streams.kafka.admin import wait_ready
from streams.kafka.settings import KafkaSettings

KAFKA_VERSION = "3.9.2"
ROOT = Path(__file__).resolve().parents[1]
POM = ROOT / "kafka" / "pom.xml"
JARS_DIR = Path(os.environ.get("TIDEMARK_KAFKA_JARS", ROOT / ".kafka" / "jars"))
DEV_HOME = ROOT / ".data" / "kafka"
DEV_PORT = 9092
DEV_CONTROLLER_PORT = 9093
_MARKER = f".complete-{KAFKA_VERSION}"

_LOG4J = """\
log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File={log}
log4j.appender.file.MaxFileSize=20MB
log4j.appender.file.MaxBackupIndex=2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaRaftServer=INFO
"""

_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={log_dirs}
num.partitions=1
# One node: internal topics at replication 1, or transactions hang (min ISR defaults to 2).
offsets.topic.replication.factor=1
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=6
default.replication.factor=1
min.insync.replicas=1
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

# Values written unquoted into server.properties, a JAAS line and the storage tool's
# --add-scram argument: no character any of those three would read as syntax.
_PLAIN_TOKEN = re.compile(r"[A-Za-z0-9_.-]{1,200}")


@dataclass(frozen=True)
class Certificates:
    """A throwaway CA and a broker certificate it signed, for 127.0.0.1 and localhost."""

    ca_pem: Path  # the CA certificate: clients' ssl.ca.location, and the broker's truststore
    keystore: Path  # the broker's PKCS12 keystore: its key, its certificate and the CA's
    keystore_password: str = field(repr=False)


def make_certificates(folder: Path, validity_days: int = 2) -> Certificates:
    """Generate a CA and a broker keystore into `folder` with the JDK's keytool."""
    keytool = str(Path(_java()).with_name("keytool"))
    folder.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(18)
    ca_store, ca_pem = folder / "ca.p12", folder / "ca.pem"
    keystore, csr, cert = folder / "broker.p12", folder / "broker.csr", folder / "broker.pem"
    for stale in (ca_store, ca_pem, keystore, csr, cert):
        stale.unlink(missing_ok=True)
    common = ["-storetype", "PKCS12", "-storepass", password, "-keypass", password]
    key = ["-keyalg", "EC", "-groupname", "secp256r1", "-validity", str(validity_days)]
    steps = [
        ["-genkeypair", "-alias", "ca", "-dname", "CN=Tidemark test CA", "-ext", "bc:c",
         *key, "-keystore", str(ca_store), *common],
        ["-exportcert", "-rfc", "-alias", "ca", "-file", str(ca_pem), "-keystore",
         str(ca_store), *common],
        ["-genkeypair", "-alias", "broker", "-dname", "CN=localhost", *key,
         "-keystore", str(keystore), *common],
        ["-certreq", "-alias", "broker", "-file", str(csr), "-keystore", str(keystore), *common],
        ["-gencert", "-rfc", "-alias", "ca", "-infile", str(csr), "-outfile", str(cert),
         "-ext", "san=dns:localhost,ip:127.0.0.1", "-ext", "eku=serverAuth,clientAuth",
         "-validity", str(validity_days), "-keystore", str(ca_store), *common],
        ["-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem),
         "-keystore", str(keystore), *common],
        ["-importcert", "-alias", "broker", "-file", str(cert), "-keystore", str(keystore),
         *common],
    ]  # fmt: skip
    for step in steps:
        done = subprocess.run([keytool, *step], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise BrokerUnavailable(f"keytool {step[0]} failed:\n{done.stdout}{done.stderr}")
    csr.unlink()
    return Certificates(ca_pem, keystore, password)


@dataclass(frozen=True)
class SaslSsl:
    """The broker's one client listener as SASL_SSL with SCRAM: its TLS and its one user.

    The user's SCRAM credentials are written into the metadata when the storage is formatted,
    so they exist before the broker starts (KRaft has no ZooKeeper to add them to).
    """

    certificates: Certificates
    username: str = "tidemark"
    password: str = field(default_factory=lambda: secrets.token_urlsafe(24), repr=False)
    mechanism: str = "SCRAM-SHA-512"

    def __post_init__(self) -> None:
        for name in ("username", "password"):
            if not _PLAIN_TOKEN.fullmatch(getattr(self, name)):
                raise ValueError(f"the SASL {name} may hold only letters, digits and _.-")
        if self.mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ValueError(f"{self.mechanism} is not a SCRAM mechanism")

    def security(self) -> dict[str, str]:
        """A client's librdkafka security keys (KafkaSettings.security) for this listener."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": self.mechanism,
            "sasl.username": self.username,
            "sasl.password": self.password,
            "ssl.ca.location": str(self.certificates.ca_pem.resolve()),
        }

    def environment(self) -> dict[str, str]:
        """The same as the KAFKA_* variables that KafkaSettings.from_env reads."""
        sec = self.security()
        return {
            "KAFKA_SECURITY_PROTOCOL": sec["security.protocol"],
            "KAFKA_SASL_MECHANISM": sec["sasl.mechanism"],
            "KAFKA_SASL_USERNAME": sec["sasl.username"],
            "KAFKA_SASL_PASSWORD": sec["sasl.password"],
            "KAFKA_SSL_CA_LOCATION": sec["ssl.ca.location"],
        }

    def add_scram_argument(self) -> str:
        return f"{self.mechanism}=[name={self.username},password={self.password}]"


def fetch_jars(jars_dir: Path = JARS_DIR) -> Path:
    """Download Kafka's jars once with Maven; later calls return at once."""
    if (jars_dir / _MARKER).exists():
        return jars_dir
    if shutil.which("mvn") is None:
        raise BrokerUnavailable("Maven (mvn) is needed to fetch the Kafka jars; install it")
    staging = jars_dir.with_name(jars_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    print(f"fetching Apache Kafka {KAFKA_VERSION} jars from Maven Central ...", file=sys.stderr)
    cmd = [
        "mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
        "-DincludeScope=runtime", f"-DoutputDirectory={staging}",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BrokerUnavailable(f"mvn could not fetch the Kafka jars:\n{done.stdout}{done.stderr}")
    (staging / _MARKER).touch()
    shutil.rmtree(jars_dir, ignore_errors=True)
    staging.rename(jars_dir)
    return jars_dir


def new_cluster_id() -> str:
    """A random 22-character base64 cluster id, never starting with "-" (which the storage
    tool's argument parser would take for an option, as Kafka's own random-uuid avoids too)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _port_taken(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise BrokerUnavailable("a JDK (java 17) is needed to run the local Kafka broker")
    return java


@dataclass
class LocalBroker:
    """One KRaft node that is broker and controller, with its data and logs under `home`."""

    home: Path
    port: int
    controller_port: int
    jars_dir: Path = JARS_DIR
    sasl_ssl: SaslSsl | None = None  # None: the PLAINTEXT listener of the development broker

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def settings(self) -> KafkaSettings:
        """How a client reaches this broker, with the credentials of its SASL_SSL listener."""
        security = self.sasl_ssl.security() if self.sasl_ssl else {}
        return KafkaSettings(self.bootstrap_servers, security)

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
            port=self.port,
            controller_port=self.controller_port,
            log_dirs=(self.home / "data").resolve(),
        )
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
        (self.home / "log4j.properties").write_text(_LOG4J.format(log=self.log_file.resolve()))
        return props

    def _java_cmd(self, main: str, *args: str) -> list[str]:
        return [
            _java(), "-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{(self.home / 'log4j.properties').resolve()}",
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
        return pid if b"kafka.Kafka" in cmdline else None

    def start(self, timeout_s: float = 90.0) -> None:
        """Format storage if needed, start the JVM detached, and wait for a metadata answer."""
        if self.running_pid() is not None:
            raise BrokerUnavailable(f"a broker from {self.home} is already running")
        for port in (self.port, self.controller_port):
            if _port_taken(port):
                raise BrokerUnavailable(f"port {port} on 127.0.0.1 is taken by another process")
        fetch_jars(self.jars_dir)
        props = self._write_config()
        if not (self.home / "data" / "meta.properties").exists():
            cluster_id = new_cluster_id()
            fmt = self._java_cmd(
                "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props), "-g"
            )
            if self.sasl_ssl is not None:
                fmt += ["--add-scram", self.sasl_ssl.add_scram_argument()]
            done = subprocess.run(fmt, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise BrokerUnavailable(f"formatting Kafka storage failed:\n{done.stderr}")
        with open(self.home / "logs" / "stdout.log", "ab") as out:
            proc = subprocess.Popen(
                self._java_cmd("kafka.Kafka", str(props)),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C in a terminal goes to us, not to the broker
            )
        self.pid_file.write_text(str(proc.pid))
        deadline = time.monotonic() + timeout_s
        settings = self.settings
        while True:
            if proc.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                raise BrokerUnavailable(
                    f"the broker exited with code {proc.returncode}; see {self.log_file}:\n"
                    + self.log_tail()
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

    def stop(self, timeout_s: float = 30.0) -> bool:
        """SIGTERM, then SIGKILL after `timeout_s`; return whether a broker was running."""
        pid = self.running_pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        try:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        except BaseException:  # interrupted (a second Ctrl-C): never leave the JVM behind
            os.kill(pid, signal.SIGKILL)
            raise
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.05)
        self.pid_file.unlink(missing_ok=True)
        return True

    def log_tail(self, lines: int = 30) -> str:
        text = ""
        for f in (self.log_file, self.home / "logs" / "stdout.log"):
            if f.exists():
                text += "\n".join(f.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text


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


def ephemeral_broker(home: Path, sasl_ssl: SaslSsl | None = None) -> LocalBroker:
    return LocalBroker(home, free_port(), free_port(), sasl_ssl=sasl_ssl)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    command = args[0] if args else "status"
    broker = dev_broker()
    try:
        if command == "fetch":
            print(f"Kafka jars in {fetch_jars()}")
        elif command == "start":
            if broker.running_pid() is not None:
                wait_ready(KafkaSettings(broker.bootstrap_servers), timeout_s=30)
                print(f"Kafka is already running on {broker.bootstrap_servers}")
            else:
                broker.start()
                print(f"Kafka {KAFKA_VERSION} is up on {broker.bootstrap_servers}")
                print(f"  data and logs: {broker.home}; stop it with: make kafka-stop")
        elif command == "stop":
            print("Kafka stopped" if broker.stop() else "Kafka was not running")
        elif command == "status":
            pid = broker.running_pid()
            print(f"running (pid {pid}) on {broker.bootstrap_servers}" if pid else "not running")
            return 0 if pid else 1
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except BrokerUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
