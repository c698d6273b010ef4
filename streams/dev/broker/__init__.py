"""A real Apache Kafka (KRaft, 4.3.2 or 3.9.2) from Maven Central jars, run with `java`.

One launcher, four uses: `make kafka` / `make kafka-stop` (a development broker on
127.0.0.1:9092, `python -m streams.dev.broker`), the pytest session fixture (an ephemeral broker
on free ports), `make run`, and a local N-node cluster for tests of broker faults
(`LocalCluster`: nodes stopped, killed, paused and restarted one by one).

- `jars`: the Maven fetch and the JDK;
- `node`: one node (`LocalBroker`), broker and controller in one JVM;
- `cluster`: N such nodes with one quorum and replicated topics (`LocalCluster`);
- `tls`: `LocalBroker(..., sasl_ssl=SaslSsl(...))` starts it with one SASL_SSL listener
  (SCRAM-SHA-512, TLS from `make_certificates`, made with the JDK's keytool) instead of the
  PLAINTEXT one.
"""

from __future__ import annotations

from streams.dev.broker.cluster import LocalCluster, ephemeral_cluster
from streams.dev.broker.jars import JARS_DIR, KAFKA_VERSION, POM, ROOT, fetch_jars
from streams.dev.broker.node import (
    DEV_CONTROLLER_PORT,
    DEV_HOME,
    DEV_PORT,
    LocalBroker,
    dev_broker,
    ephemeral_broker,
    new_cluster_id,
)
from streams.dev.broker.ports import free_port
from streams.dev.broker.tls import Certificates, SaslSsl, make_certificates

__all__ = [
    "DEV_CONTROLLER_PORT",
    "DEV_HOME",
    "DEV_PORT",
    "JARS_DIR",
    "KAFKA_VERSION",
    "POM",
    "ROOT",
    "Certificates",
    "LocalBroker",
    "LocalCluster",
    "SaslSsl",
    "dev_broker",
    "ephemeral_broker",
    "ephemeral_cluster",
    "fetch_jars",
    "free_port",
    "make_certificates",
    "new_cluster_id",
]
