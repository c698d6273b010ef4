"""Apache Kafka's jars from Maven Central (fetched once into .kafka/jars); the JDK to run them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from streams.errors import BrokerUnavailable

KAFKA_VERSION = "3.9.2"
ROOT = Path(__file__).resolve().parents[2]
POM = ROOT / "kafka" / "pom.xml"
JARS_DIR = Path(os.environ.get("TIDEMARK_KAFKA_JARS", ROOT / ".kafka" / "jars"))
_MARKER = f".complete-{KAFKA_VERSION}"


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


def java() -> str:
    """The `java` of JAVA_HOME, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).exists():
        raise BrokerUnavailable("a JDK (java 17) is needed to run the local Kafka broker")
    return found
