"""A broker's SASL_SSL listener for tests: a throwaway CA and certificates (made with the JDK's
keytool), and one SCRAM user."""

from __future__ import annotations

import re
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from streams.dev.broker.jars import java
from streams.errors import BrokerUnavailable

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
    keytool = str(Path(java()).with_name("keytool"))
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
