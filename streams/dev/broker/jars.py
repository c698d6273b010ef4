"""Apache Kafka's jars from Maven Central (fetched once per version); the JDK to run them.

Which version: TIDEMARK_KAFKA_VERSION, else the version already in TIDEMARK_KAFKA_JARS (a
folder fetched before, e.g. by an older checkout, keeps what it holds), else the default,
4.3.2 (streams/dev/broker/versions.py says why). Where: TIDEMARK_KAFKA_JARS when it holds that
version or nothing yet, else .kafka/jars-<version>, so two versions sit side by side and a test
session can run both (the Faust engine's tests run on 3.9.2).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from streams.dev.broker.versions import DEFAULT_KAFKA_VERSION, maven_profile
from streams.errors import BrokerUnavailable

ROOT = Path(__file__).resolve().parents[3]
POM = ROOT / "kafka" / "pom.xml"
_MARKER_PREFIX = ".complete-"


def marked_version(jars_dir: Path) -> str | None:
    """The version of a complete fetch in `jars_dir`, None if there is none."""
    try:
        markers = [p.name for p in jars_dir.iterdir() if p.name.startswith(_MARKER_PREFIX)]
    except OSError:
        return None
    return markers[0].removeprefix(_MARKER_PREFIX) if markers else None


def _env_jars() -> Path | None:
    named = os.environ.get("TIDEMARK_KAFKA_JARS")
    return Path(named) if named else None


def kafka_version() -> str:
    """The version the broker runs unless a caller names one (see the module docstring)."""
    named = os.environ.get("TIDEMARK_KAFKA_VERSION")
    if named:
        return named
    env_jars = _env_jars()
    return (marked_version(env_jars) if env_jars else None) or DEFAULT_KAFKA_VERSION


def jars_dir_for(version: str) -> Path:
    """The folder for `version`'s jars: TIDEMARK_KAFKA_JARS if it holds them or nothing yet
    (and `version` is the session's), else .kafka/jars-<version>."""
    env_jars = _env_jars()
    if env_jars is not None:
        held = marked_version(env_jars)
        if held == version or (held is None and version == kafka_version()):
            return env_jars
    return ROOT / ".kafka" / f"jars-{version}"


KAFKA_VERSION = kafka_version()
JARS_DIR = jars_dir_for(KAFKA_VERSION)


def fetch_jars(jars_dir: Path = JARS_DIR, version: str | None = None) -> Path:
    """Download Kafka's jars once with Maven; later calls return at once.

    `version` None means whatever `jars_dir` holds, else KAFKA_VERSION. A folder holding another
    version is never overwritten: it may be one that other checkouts use (TIDEMARK_KAFKA_JARS).
    """
    held = marked_version(jars_dir)
    if held is not None and version in (None, held):
        return jars_dir
    if held is not None:
        raise BrokerUnavailable(
            f"{jars_dir} holds Kafka {held}, not {version}; name another folder"
        )
    version = version or KAFKA_VERSION
    staging = jars_dir.with_name(jars_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    print(f"fetching Apache Kafka {version} jars from Maven Central ...", file=sys.stderr)
    copy_jars(staging, version)
    (staging / f"{_MARKER_PREFIX}{version}").touch()
    shutil.rmtree(jars_dir, ignore_errors=True)
    staging.rename(jars_dir)
    return jars_dir


def copy_jars(into: Path, version: str, profiles: Sequence[str] = ()) -> None:
    """Copy Kafka `version`'s runtime jars, and those of the pom's extra `profiles` (`tools`:
    the command-line tools), into `into` with Maven (its local cache once fetched)."""
    if shutil.which("mvn") is None:
        raise BrokerUnavailable("Maven (mvn) is needed to fetch the Kafka jars; install it")
    extra = [arg for profile in profiles for arg in ("-P", profile)]
    cmd = [
        "mvn", "-q", "-B", "-f", str(POM), *maven_profile(version), *extra,
        "dependency:copy-dependencies", f"-Dkafka.version={version}", "-DincludeScope=runtime",
        f"-DoutputDirectory={into}",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BrokerUnavailable(f"mvn could not fetch the Kafka jars:\n{done.stdout}{done.stderr}")


def java() -> str:
    """The `java` of JAVA_HOME, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).exists():
        raise BrokerUnavailable("a JDK (java 17) is needed to run the local Kafka broker")
    return found
