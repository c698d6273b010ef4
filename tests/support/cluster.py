"""A local three-node KRaft cluster for the tests of broker faults (streams.devbroker.cluster).

Only a module that asks for the `kafka_cluster3` fixture starts one: three JVMs take about
1.5 GB and half a minute, so no other test pays for them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from streams.devbroker import LocalCluster, ephemeral_cluster


@contextmanager
def local_cluster(home: Path, size: int = 3) -> Iterator[LocalCluster]:
    """Start a cluster of `size` nodes (replication min(size, 3), min ISR one less); stop it
    and every node of it on exit, whatever the test did to them."""
    cluster = ephemeral_cluster(home, size)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
