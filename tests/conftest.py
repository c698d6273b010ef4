"""Session-wide fixtures: a real Kafka cluster, unique names per test, and leak checks."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.dev.broker import LocalCluster
from streams.kafka.settings import KafkaSettings
from tests.support.broker import kafka_cluster
from tests.support.cluster import local_cluster


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Groups for `pytest -n N --dist loadgroup` (make test): a module's tests stay on one
    worker (its module fixtures start once), and the three-node cluster tests of every module
    share one worker, one after the other: two clusters of three JVMs at once beside the other
    broker tests, on 2 cores, slowed a node's restart past two minutes."""
    for item in items:
        if _long_on_faust(item):
            item.add_marker(pytest.mark.long)
        if item.get_closest_marker("xdist_group") is not None:
            continue
        group = "cluster" if item.get_closest_marker("cluster") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))


def _long_on_faust(item: pytest.Item) -> bool:
    """Whether `item` is the Faust engine's variant of a test its module lists in
    `LONG_ON_FAUST` (test names): `make test` runs such a scenario on the default engine and
    `make test-long` on both (the mark `long`)."""
    names = getattr(getattr(item, "module", None), "LONG_ON_FAUST", ())
    callspec = getattr(item, "callspec", None)
    if callspec is None or getattr(item, "originalname", "") not in names:
        return False
    return "faust" in callspec.id.split("-")


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with kafka_cluster(tmp_path_factory.mktemp("kafka")) as bootstrap:
        yield bootstrap


@pytest.fixture
def kafka(kafka_bootstrap: str) -> KafkaSettings:
    return KafkaSettings(kafka_bootstrap)


@pytest.fixture(scope="module")
def kafka_cluster3_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster


@pytest.fixture
def kafka_cluster3(kafka_cluster3_module: LocalCluster) -> LocalCluster:
    """A three-node cluster (replication 3, min ISR 2) shared by the module's tests, started
    only for a module that asks; each test gets it with all three nodes up."""
    kafka_cluster3_module.heal()
    return kafka_cluster3_module


@pytest.fixture
def unique() -> str:
    """A fresh suffix for topic names and group ids, so tests never see each other's data."""
    return uuid.uuid4().hex[:10]


def _child_pids() -> set[int]:
    me = os.getpid()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    """A test that leaves threads or child processes behind fails."""
    threads = set(threading.enumerate())
    children = _child_pids()
    yield
    deadline = time.monotonic() + 5
    while True:
        extra_threads = [t for t in threading.enumerate() if t not in threads and t.is_alive()]
        extra_children = _child_pids() - children
        if not (extra_threads or extra_children) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not extra_threads, f"threads left behind: {extra_threads}"
    assert not extra_children, f"child processes left behind: {sorted(extra_children)}"
