"""The stack's images, built on this machine where no registry is reachable.

- ``tidemark/debian:bookworm``: Debian's minimal base from ``debootstrap``, imported;
- ``tidemark/kafka:<version>``: Kafka's jars from Maven Central on that base with a JRE, in the
  layout of ``apache/kafka`` (deploy/images/kafka);
- ``tidemark/prometheus:local``: Debian's ``prometheus`` package (deploy/images/prometheus);
- ``tidemark:local``: the repository's Dockerfile on that base.

An image already built is kept (docker's layer cache makes a rebuild of an unchanged one quick).
Builds run with ``--network host``: the host reaches the package registries, a container on the
default bridge may not. The users' compose file keeps the official images; docker-compose.yml's
variables (``LocalImages.compose_env``) switch it to these.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from streams.dev.broker.jars import copy_jars
from streams.dev.broker.versions import DEFAULT_KAFKA_VERSION
from streams.dev.docker.engine import INSTALL_HINT, ROOT, DockerUnavailable
from streams.errors import BrokerUnavailable

IMAGES = ROOT / "deploy" / "images"
BASE = "tidemark/debian:bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"


@dataclass(frozen=True)
class LocalImages:
    base: str
    kafka: str
    prometheus: str
    tidemark: str

    def compose_env(self) -> dict[str, str]:
        """docker-compose.yml's variables that pick these images."""
        return {
            "TIDEMARK_IMAGE": self.tidemark,
            "KAFKA_IMAGE": self.kafka,
            "PROMETHEUS_IMAGE": self.prometheus,
        }


def _say(message: str) -> None:
    print(f"images: {message}", file=sys.stderr, flush=True)


STEP_TIMEOUT_S = 900.0  # a build step (an apt or pip download among them) at most


def _run(cmd: list[str], what: str, stdin: IO[bytes] | None = None) -> None:
    """Run a build step; on failure, or past STEP_TIMEOUT_S, raise with the tail of its output."""
    began = time.monotonic()
    try:
        done = subprocess.run(cmd, stdin=stdin, capture_output=True, text=True, check=False,
                              timeout=STEP_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise DockerUnavailable(f"{what} did not finish within {STEP_TIMEOUT_S:g} s") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise DockerUnavailable(f"{what} failed (exit {done.returncode}):\n{tail}")
    _say(f"{what}: done in {time.monotonic() - began:.0f} s")


def exists(image: str) -> bool:
    done = subprocess.run(["docker", "image", "inspect", image], capture_output=True, check=False)
    return done.returncode == 0


def apt_mirror() -> str:
    """The Debian mirror apt uses on this machine (deb822 or one-line sources)."""
    sources = sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))
    for path in sources:
        found = re.search(r"^URIs:\s*(\S+/debian)\s*$", path.read_text(), re.MULTILINE)
        if found:
            return found.group(1)
    listed = Path("/etc/apt/sources.list")
    if listed.exists():
        found = re.search(r"^deb\s+(\S+/debian)\s", listed.read_text(), re.MULTILINE)
        if found:
            return found.group(1)
    return DEFAULT_MIRROR


def base_image(name: str = BASE) -> str:
    """Debian bookworm's minimal system as an image (about 30 s with debootstrap, once)."""
    if exists(name):
        return name
    if shutil.which("debootstrap") is None:
        raise DockerUnavailable(f"debootstrap is needed to make the base image; {INSTALL_HINT}")
    with tempfile.TemporaryDirectory(prefix="tidemark-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        mirror = apt_mirror()
        _say(f"making {name} with debootstrap from {mirror} (about 30 s) ...")
        _run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs), mirror], "debootstrap")
        changes = _trust_host_certificates(rootfs)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        _run(["docker", "import", *changes, "-", name], f"docker import {name}", stdin=tar.stdout)
        if tar.wait() != 0:
            raise DockerUnavailable(f"tar of {rootfs} failed")
    return name


HOST_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
IMAGE_BUNDLE = "/etc/ssl/certs/host-ca-certificates.crt"


def _trust_host_certificates(rootfs: Path) -> list[str]:
    """Give the base this machine's trust store, and ``docker import`` changes pointing pip and
    Python's ssl at it: where HTTPS goes through a proxy with its own authority (as here), pip
    in a build would not reach PyPI with its own bundle. The local authorities go to
    /usr/local/share/ca-certificates too, so that a ``ca-certificates`` installed later in a
    derived image keeps them."""
    if not HOST_BUNDLE.exists():
        return []
    bundle = rootfs / IMAGE_BUNDLE.lstrip("/")
    bundle.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(HOST_BUNDLE, bundle)
    local = Path("/usr/local/share/ca-certificates")
    if local.is_dir():
        shutil.copytree(local, rootfs / "usr/local/share/ca-certificates", dirs_exist_ok=True)
    return [
        "--change", f"ENV PIP_CERT={IMAGE_BUNDLE}",
        "--change", f"ENV SSL_CERT_FILE={IMAGE_BUNDLE}",
        "--change", f"ENV REQUESTS_CA_BUNDLE={IMAGE_BUNDLE}",
    ]  # fmt: skip


def build(tag: str, context: Path, dockerfile: Path | None = None, base: str = BASE) -> str:
    """``docker build`` of ``context`` with BASE set; its output is shown only on failure."""
    cmd = ["docker", "build", "--network", "host", "--build-arg", f"BASE={base}", "-t", tag]
    if dockerfile is not None:
        cmd += ["-f", str(dockerfile)]
    _say(f"building {tag} (a minute or two the first time) ...")
    _run([*cmd, str(context)], f"docker build {tag}")
    return tag


def kafka_jars(into: Path, version: str) -> None:
    """Kafka's broker and tools jars from Maven Central (the local Maven cache once fetched)."""
    _say(f"fetching Kafka {version}'s jars for the image ...")
    try:
        copy_jars(into, version, profiles=["tools"])
    except BrokerUnavailable as exc:
        raise DockerUnavailable(str(exc)) from exc


def kafka_image(version: str = DEFAULT_KAFKA_VERSION, base: str = BASE) -> str:
    tag = f"tidemark/kafka:{version}"
    with tempfile.TemporaryDirectory(prefix="tidemark-kafka-image-") as tmp:
        context = Path(tmp)
        for source in (IMAGES / "kafka").iterdir():
            shutil.copy2(source, context / source.name)
        kafka_jars(context / "jars", version)
        return build(tag, context, base=base)


def build_images(version: str = DEFAULT_KAFKA_VERSION) -> LocalImages:
    """Every image of the stack, built here (each a quick no-op when unchanged)."""
    base = base_image()
    return LocalImages(
        base=base,
        kafka=kafka_image(version, base),
        prometheus=build("tidemark/prometheus:local", IMAGES / "prometheus", base=base),
        tidemark=build("tidemark:local", ROOT, ROOT / "Dockerfile", base=base),
    )
