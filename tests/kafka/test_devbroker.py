"""The local broker launcher's pure parts."""

from __future__ import annotations

import os
import random
import re
import time
from pathlib import Path

import pytest

import streams.dev.broker.ports as ports
from streams.dev.broker import LocalBroker, free_port, new_cluster_id
from streams.dev.broker.jars import (
    ROOT,
    fetch_jars,
    jars_dir_for,
    kafka_version,
    marked_version,
)
from streams.dev.broker.versions import DEFAULT_KAFKA_VERSION, KAFKA4, KAFKA39
from streams.errors import BrokerUnavailable


def test_cluster_ids_are_22_base64_characters_never_starting_with_a_dash() -> None:
    ids = {new_cluster_id() for _ in range(5000)}  # about 78 would start with "-" unchecked
    assert len(ids) == 5000
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", i) for i in ids)


def _jars(folder: Path, version: str | None) -> Path:
    folder.mkdir(parents=True)
    if version:
        (folder / f".complete-{version}").touch()
    return folder


def test_the_kafka_version_is_the_env_s_else_the_one_in_the_named_jars_else_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TIDEMARK_KAFKA_VERSION", raising=False)
    monkeypatch.delenv("TIDEMARK_KAFKA_JARS", raising=False)
    assert kafka_version() == DEFAULT_KAFKA_VERSION == KAFKA4
    assert jars_dir_for(KAFKA4) == ROOT / ".kafka" / f"jars-{KAFKA4}"
    # A folder fetched before (the other checkouts' TIDEMARK_KAFKA_JARS) keeps its version.
    old = _jars(tmp_path / "jars", KAFKA39)
    monkeypatch.setenv("TIDEMARK_KAFKA_JARS", str(old))
    assert kafka_version() == KAFKA39
    assert jars_dir_for(KAFKA39) == old
    assert jars_dir_for(KAFKA4) == ROOT / ".kafka" / f"jars-{KAFKA4}"  # never into `old`
    monkeypatch.setenv("TIDEMARK_KAFKA_VERSION", KAFKA4)
    assert kafka_version() == KAFKA4
    assert jars_dir_for(KAFKA4) == ROOT / ".kafka" / f"jars-{KAFKA4}"


def test_a_jars_folder_holding_another_version_is_never_overwritten(tmp_path: Path) -> None:
    old = _jars(tmp_path / "jars", KAFKA39)
    assert fetch_jars(old) == old  # what it holds, whatever it is
    assert fetch_jars(old, KAFKA39) == old
    with pytest.raises(BrokerUnavailable, match=re.escape(f"holds Kafka {KAFKA39}, not {KAFKA4}")):
        fetch_jars(old, KAFKA4)
    assert marked_version(old) == KAFKA39


@pytest.mark.parametrize("version", [KAFKA39, KAFKA4])
def test_each_version_gets_the_config_and_logging_it_needs(tmp_path: Path, version: str) -> None:
    broker = LocalBroker(tmp_path, 1, 2, jars_dir=_jars(tmp_path / "jars", version))
    assert broker.version == version
    props = broker._write_config().read_text()
    cmd = " ".join(broker._java_cmd("kafka.Kafka", "x"))
    if version == KAFKA4:  # log4j2 (KIP-653); the broker's KIP-848 session timeout
        assert "group.consumer.session.timeout.ms=10000" in props
        assert (tmp_path / "log4j2.properties").exists()
        assert "-Dlog4j2.configurationFile=file:" in cmd
    else:  # reload4j; no key 3.9 does not know
        assert "group.consumer" not in props
        assert (tmp_path / "log4j.properties").exists()
        assert "-Dlog4j.configuration=file:" in cmd
    for removed in ("log.message.format.version", "zookeeper.connect"):  # gone in Kafka 4
        assert removed not in props


def test_listening_ports_are_outside_the_ephemeral_range_so_no_client_can_hold_one() -> None:
    """A client reconnecting to a stopped node's port from that same ephemeral port connects to
    itself and holds it: the node's restart then finds its port taken. A node's ports are
    therefore never in the kernel's ephemeral range."""
    path = Path("/proc/sys/net/ipv4/ip_local_port_range")
    if not path.exists():
        pytest.skip("no /proc/sys/net/ipv4/ip_local_port_range on this system")
    low, high = (int(v) for v in path.read_text().split())
    ports = {free_port() for _ in range(50)}
    assert len(ports) > 1
    assert not [p for p in ports if low <= p <= high]


def test_a_port_given_to_one_process_is_not_given_to_another_for_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker stopped for an outage leaves its port free; another test's process must not be
    given it meanwhile (one was, and the broker could not restart on its port)."""
    monkeypatch.setattr(ports, "_RESERVED", tmp_path)
    first = free_port()
    offered = iter([first, first, first])
    choose = random.choice
    monkeypatch.setattr(ports.random, "choice", lambda seq: next(offered, None) or choose(seq))
    second = free_port()
    assert second != first
    # Once the claim is older than RESERVED_S, the port can be given again.
    old_s = time.time() - ports.RESERVED_S - 1
    os.utime(tmp_path / str(first), (old_s, old_s))
    offered = iter([first])
    assert free_port() == first
