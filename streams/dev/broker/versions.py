"""What differs between the Kafka versions the local broker runs: 3.9.2 and the 4.x default.

Why 4.3.2 for the 4.x line: the broker of every 4.x needs Java 17, which is what this machine
and CI have; 4.3 is the newest line with patch releases on Maven Central (4.4.0 has none yet),
and all of 4.x has the KIP-848 consumer group protocol generally available and the second
part of KIP-890's transaction hardening (`transaction.version=2`). 3.9.2, the last 3.x, stays
runnable (`TIDEMARK_KAFKA_VERSION=3.9.2`): the Faust engine's aiokafka is tested on it.
"""

from __future__ import annotations

from pathlib import Path

KAFKA39 = "3.9.2"
KAFKA4 = "4.3.2"
DEFAULT_KAFKA_VERSION = KAFKA4


def major(version: str) -> int:
    return int(version.split(".", 1)[0])


# Kafka 3.9 logs through reload4j (log4j 1 syntax), as its official tarball ships it.
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

# Kafka 4 moved to log4j2 (KIP-653): the same logging in log4j2's properties syntax.
_LOG4J2 = """\
status=warn
appender.file.type=RollingFile
appender.file.name=file
appender.file.fileName={log}
appender.file.filePattern={log}.%i
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
appender.file.policies.type=Policies
appender.file.policies.size.type=SizeBasedTriggeringPolicy
appender.file.policies.size.size=20MB
appender.file.strategy.type=DefaultRolloverStrategy
appender.file.strategy.max=2
rootLogger.level=warn
rootLogger.appenderRef.file.ref=file
logger.raft.name=kafka.server.KafkaRaftServer
logger.raft.level=info
"""

# Broker properties Kafka 4 needs on top of the common ones (streams/dev/broker/node.py). None
# of the common ones was removed in 4.0 (no `log.message.format.version`, no ZooKeeper key).
# The group protocols are not listed: `group.coordinator.rebalance.protocols` is deprecated
# (4.3.2 warns that 5.0 removes it); `classic` is always on and KIP-848's `consumer` comes with the
# `group.version=1` feature, written at format (format_features).
# KIP-848's session timeout is the broker's, not the client's (the client may not set it): 45 s
# by default, which is how long a killed coordinator's partitions would wait. 10 s, the classic
# timeout Tidemark's clients ask for (streams/coordinator/settings.py), keeps a takeover after a
# crash comparable between the protocols; the heartbeat stays at a fifth of it.
_KAFKA4_PROPERTIES = """\
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=10000
group.consumer.min.heartbeat.interval.ms=1000
group.consumer.heartbeat.interval.ms=2000
"""


def log_config(version: str, log_file: Path) -> tuple[str, str, str]:
    """(file name, its text, the JVM flag naming it) of the broker's logging configuration."""
    if major(version) >= 4:
        return "log4j2.properties", _LOG4J2.format(log=log_file), "-Dlog4j2.configurationFile"
    return "log4j.properties", _LOG4J.format(log=log_file), "-Dlog4j.configuration"


def extra_properties(version: str) -> str:
    return _KAFKA4_PROPERTIES if major(version) >= 4 else ""


def format_features(version: str) -> list[str]:
    """Feature levels given to the storage tool's `format`. On 4.x both are the defaults
    already, written out so that a change of default cannot pass unseen: KIP-890's second part
    (`transaction.version=2`: the epoch bumped at every transaction, no hanging transactions)
    and KIP-848's consumer group protocol (`group.version=1`)."""
    if major(version) < 4:
        return []
    return ["--feature", "transaction.version=2", "--feature", "group.version=1"]


def maven_profile(version: str) -> list[str]:
    """The pom's logging backend: reload4j for 3.9 (its default profile), log4j2 for 4.x."""
    return ["-P", "kafka4"] if major(version) >= 4 else []
