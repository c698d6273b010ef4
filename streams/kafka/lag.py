"""Consumer lag per group and partition: committed offsets against the log's end.

Lag is what a group still has to read: ``high watermark - max(committed, low watermark)`` (below
the low watermark the records are gone, and a consumer resumes at the low watermark). Only
partitions the group has committed an offset for are reported.

Committed offsets are read through a plain ``Consumer`` of the group (``committed()``; it never
subscribes, so it never joins the group), not through ``AdminClient.list_consumer_group_offsets``:
when the group coordinator moves (a broker restarts), librdkafka's admin worker handles the
OffsetFetch answer NOT_COORDINATOR by queueing a coordinator query on the client's consumer
group, and an AdminClient has none: a NULL dereference kills the process (``rd_kafka_cgrp_op``
from ``rd_kafka_handle_OffsetFetch`` from ``rd_kafka_ListConsumerGroupOffsetsResponse_parse``,
confluentinc/librdkafka#5040, seen 8 times in the three-broker chaos runs of issue 26). The issue
is open and no release lists a fix: not librdkafka 2.16.0's release notes, nor confluent-kafka's
changelog up to 2.16.1, the newest on PyPI in December 2026 (confluent-kafka-javascript#374
reports the same stack, open too). A consumer has a group, so the same answer makes it look the
coordinator up again. The group listing (ListGroups) and the watermarks (ListOffsets) stay on
the AdminClient: they do not go through a group.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec  # not re-exported for type checkers

from streams.errors import BrokerUnavailable
from streams.kafka.admin import admin_client
from streams.kafka.errors import broker_errors, error_code
from streams.kafka.settings import KafkaSettings

Partitions = list[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class LagRow:
    group: str
    topic: str
    partition: int
    committed: int
    high_watermark: int
    lag: int


class CommittedOffsets:
    """Committed offsets of groups, each read through a Consumer of its own, made on first use
    and kept (a consumer finds its group coordinator once, then on NOT_COORDINATOR again).

    Not thread-safe: one thread reads and then closes.
    """

    def __init__(
        self, settings: KafkaSettings, new_consumer: Callable[[dict[str, Any]], Any] = Consumer
    ) -> None:
        self._settings = settings
        self._new_consumer = new_consumer
        self._consumers: dict[str, Any] = {}

    def read(
        self, group: str, partitions: Partitions, timeout_s: float, strict: bool = True
    ) -> dict[tuple[str, int], int]:
        """``{(topic, partition): offset}`` of the partitions the group has committed.

        A partition answered with an error raises KafkaException when ``strict``; else it is
        left out, as if the group had committed nothing there.
        """
        if not partitions:
            return {}
        consumer = self._consumers.get(group)
        if consumer is None:
            consumer = self._consumers[group] = self._new_consumer(
                self._settings.librdkafka(
                    **{
                        "group.id": group,
                        "enable.auto.commit": False,
                        "enable.auto.offset.store": False,
                        # read_committed would send OffsetFetch with require_stable, and the
                        # answer waits while a transaction holds offsets of the group (the
                        # confluent engine's always does); the admin API did not wait either.
                        "isolation.level": "read_uncommitted",
                        "log_level": 0,  # the caller reports failures, once
                    }
                )
            )
        answer = consumer.committed(
            [TopicPartition(t, p) for t, p in partitions], timeout=timeout_s
        )
        failed = [tp.error for tp in answer if tp.error is not None]
        if failed and strict:
            raise KafkaException(failed[0])
        return {
            (tp.topic, tp.partition): tp.offset
            for tp in answer
            if tp.error is None and tp.offset >= 0
        }

    def close(self) -> None:
        consumers, self._consumers = list(self._consumers.values()), {}
        for consumer in consumers:
            consumer.close()


def consumer_lag(
    settings: KafkaSettings,
    groups_prefix: str | tuple[str, ...],
    admin: AdminClient | None = None,
    timeout_s: float = 5.0,
    topics: Iterable[str] | None = None,
    offsets: CommittedOffsets | None = None,
    topics_prefix: str | None = None,
) -> list[LagRow]:
    """The lag of every group whose id starts with ``groups_prefix`` (a string or a tuple), on
    the partitions of ``topics`` (None: every topic but Kafka's internal ones) and of every
    topic whose name starts with ``topics_prefix`` (the pipelines' tasks topics, made while the
    coordinator runs).

    ``offsets`` reads the committed offsets (a reader of its own, closed after, if None).
    Raises BrokerUnavailable when the cluster does not answer within ``timeout_s`` per request.
    """
    client = admin_client(settings) if admin is None else admin
    reader = CommittedOffsets(settings) if offsets is None else offsets
    try:
        with broker_errors("could not read consumer lag"):
            groups = _groups(client, groups_prefix, timeout_s)
            if not groups:
                return []
            asked = _partitions(client, topics, timeout_s, topics_prefix)
            committed = {
                (group, topic, p): offset
                for group in groups
                for (topic, p), offset in reader.read(group, asked, timeout_s).items()
            }
            partitions = sorted({(topic, p) for _, topic, p in committed})
            if not partitions:
                return []
            # Strict: while a leader moves, a partition can fail to answer (NOT_LEADER,
            # OFFSET_NOT_AVAILABLE), and leaving it out would drop its row for one refresh;
            # raising skips the refresh, and the collector serves the last full one.
            latest, earliest = OffsetSpec.latest(), OffsetSpec.earliest()  # type: ignore[no-untyped-call]
            high = _offsets(client, partitions, latest, timeout_s, strict=True)
            low = _offsets(client, partitions, earliest, timeout_s, strict=True)
    finally:
        if offsets is None:
            reader.close()
    rows = []
    for (group, topic, p), offset in sorted(committed.items()):
        end = high.get((topic, p))
        if end is None:
            continue  # the topic is gone
        start = max(offset, low.get((topic, p), 0))
        rows.append(LagRow(group, topic, p, offset, end, max(0, end - start)))
    return rows


def backlog(
    settings: KafkaSettings,
    group: str,
    topic: str,
    partitions: Iterable[int],
    admin: AdminClient | None = None,
    timeout_s: float = 5.0,
    offsets: CommittedOffsets | None = None,
) -> dict[int, tuple[int, int]]:
    """Where ``group`` will resume reading each partition of ``topic`` (its committed offset,
    or the low watermark when it has none or is below it) and the partition's end (the high
    watermark), as ``{partition: (resume_at, end)}``.

    Raises BrokerUnavailable when the cluster does not answer within ``timeout_s`` per request.
    """
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    client = admin_client(settings) if admin is None else admin
    reader = CommittedOffsets(settings) if offsets is None else offsets
    tps = [(topic, p) for p in wanted]
    try:
        with broker_errors(f"could not read where group {group!r} stands on {topic!r}"):
            # Lenient, as before: the partitions that answer get their catch-up expectation.
            committed = reader.read(group, tps, timeout_s, strict=False)
            high = _offsets(client, tps, OffsetSpec.latest(), timeout_s)  # type: ignore[no-untyped-call]
            low = _offsets(client, tps, OffsetSpec.earliest(), timeout_s)  # type: ignore[no-untyped-call]
    finally:
        if offsets is None:
            reader.close()
    found = {}
    for p in wanted:
        if (topic, p) in high:
            start = max(committed.get((topic, p), 0), low.get((topic, p), 0))
            found[p] = (start, high[(topic, p)])
    return found


# Rows that vanish from one read to the next (a group no longer listed, a partition without its
# committed offset) are believed only once they stay gone this long. While a group coordinator
# moves (a broker's controlled shutdown, seen on a 3-node cluster), ListGroups and OffsetFetch
# can answer without the group and without an error; a gauge that dropped its rows for a scrape
# would read as "nothing to do". A group really deleted keeps its last rows this long.
VANISH_CONFIRM_S = 30.0


class LagReader:
    """``consumer_lag`` for fixed groups and topics over one AdminClient and one Consumer per
    group, made on first use and kept until ``close()`` (from the thread that reads)."""

    def __init__(
        self,
        settings: KafkaSettings,
        groups_prefix: str | tuple[str, ...],
        topics: Iterable[str] | None = None,
        new_consumer: Callable[[dict[str, Any]], Any] = Consumer,
        vanish_confirm_s: float = VANISH_CONFIRM_S,
        monotonic: Callable[[], float] = time.monotonic,
        topics_prefix: str | None = None,
        new_admin: Callable[[KafkaSettings], AdminClient] = admin_client,
    ) -> None:
        self.settings = settings
        self._new_admin = new_admin
        self.groups_prefix = groups_prefix
        self.topics = None if topics is None else tuple(topics)
        self.topics_prefix = topics_prefix
        self._admin: AdminClient | None = None
        self._new_consumer = new_consumer
        self._offsets = CommittedOffsets(settings, new_consumer)
        self._vanish_confirm_s = vanish_confirm_s
        self._monotonic = monotonic
        self._seen: set[tuple[str, str, int]] = set()  # the rows of the last read believed
        self._missing_since: float | None = None

    def __call__(self) -> list[LagRow]:
        """The lag now. Raises BrokerUnavailable when the cluster does not answer, or while rows
        of the last read are missing from this one for less than `vanish_confirm_s`."""
        if self._admin is None:
            self._admin = self._new_admin(self.settings)
        rows = consumer_lag(
            self.settings,
            self.groups_prefix,
            self._admin,
            topics=self.topics,
            offsets=self._offsets,
            topics_prefix=self.topics_prefix,
        )
        keys = {(row.group, row.topic, row.partition) for row in rows}
        missing = self._seen - keys
        if missing:
            self._renew_clients()
            now = self._monotonic()
            if self._missing_since is None:
                self._missing_since = now
            if now - self._missing_since < self._vanish_confirm_s:
                raise BrokerUnavailable(
                    f"consumer lag: {len(missing)} partition(s) of groups read before are "
                    f"missing from this read (e.g. {min(missing)}); believed once they stay "
                    f"gone {self._vanish_confirm_s:g} s (a group coordinator may be moving)"
                )
        self._missing_since = None
        self._seen = keys
        return rows

    def _renew_clients(self) -> None:
        """Read with new clients next time. On the three-node cluster, a reader whose group
        coordinator moved (a controlled shutdown, then the node back) kept reading without its
        rows, and without an error, for over two minutes (tests/kafka/test_cluster.py, 1 run in
        4 here and one CI run). Which client kept the stale answer, the consumer's committed
        offsets or the admin's group listing, is not known, so both are replaced: 6 runs of 6
        passed after. A miss is rare, so new clients cost little."""
        self._offsets.close()
        self._offsets = CommittedOffsets(self.settings, self._new_consumer)
        self._admin = None

    def close(self) -> None:
        self._offsets.close()


def _wait(future: Future[Any], timeout_s: float) -> Any:
    return future.result(timeout=timeout_s)


def _groups(client: AdminClient, prefix: str | tuple[str, ...], timeout_s: float) -> list[str]:
    listed = _wait(client.list_consumer_groups(request_timeout=timeout_s), timeout_s)
    if listed.errors:
        # Some broker did not answer (e.g. the cluster is unreachable and the request timed
        # out): the list is partial, and lag read from it would silently leave groups out.
        raise KafkaException(listed.errors[0])
    return sorted(g.group_id for g in listed.valid if g.group_id.startswith(prefix))


def _partitions(
    client: AdminClient,
    topics: Iterable[str] | None,
    timeout_s: float,
    topics_prefix: str | None = None,
) -> Partitions:
    """Every partition of ``topics`` that exists (None: of every topic but ``__*`` ones), and
    of the topics named from ``topics_prefix`` on."""
    metadata = client.list_topics(timeout=timeout_s)
    names = (
        sorted(n for n in metadata.topics if not n.startswith("__")) if topics is None else topics
    )
    if topics is not None and topics_prefix:
        names = [*names, *sorted(n for n in metadata.topics if n.startswith(topics_prefix))]
    return [
        (name, p)
        for name in names
        if name in metadata.topics and metadata.topics[name].error is None
        for p in sorted(metadata.topics[name].partitions)
    ]


# A partition that is gone (its topic deleted since the group committed to it) has no lag.
_GONE = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION}
)


def _offsets(
    client: AdminClient,
    partitions: Partitions,
    spec: OffsetSpec,
    timeout_s: float,
    strict: bool = False,
) -> dict[tuple[str, int], int]:
    """Each partition's offset at ``spec``. A partition that is gone is left out; one that
    fails otherwise too, or raises KafkaException when ``strict``."""
    request = {TopicPartition(topic, p): spec for topic, p in partitions}
    futures = client.list_offsets(request, request_timeout=timeout_s)
    found = {}
    for tp, future in futures.items():
        try:
            found[(tp.topic, tp.partition)] = _wait(future, timeout_s).offset
        except KafkaException as exc:
            if strict and error_code(exc) not in _GONE:
                raise
    return found
