"""Consumer lag per group and partition: committed offsets against the log's end, via AdminClient.

Lag is what a group still has to read: ``high watermark - max(committed, low watermark)`` (below
the low watermark the records are gone, and a consumer resumes at the low watermark). Only
partitions the group has committed an offset for are reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec  # not re-exported for type checkers

from streams.kafka.admin import admin_client
from streams.kafka.errors import broker_errors
from streams.kafka.settings import KafkaSettings


@dataclass(frozen=True, slots=True)
class LagRow:
    group: str
    topic: str
    partition: int
    committed: int
    high_watermark: int
    lag: int


def consumer_lag(
    settings: KafkaSettings,
    groups_prefix: str | tuple[str, ...],
    admin: AdminClient | None = None,
    timeout_s: float = 5.0,
) -> list[LagRow]:
    """The lag of every group whose id starts with ``groups_prefix`` (a string or a tuple).

    Raises BrokerUnavailable when the cluster does not answer within ``timeout_s`` per request.
    """
    client = admin_client(settings) if admin is None else admin
    with broker_errors("could not read consumer lag"):
        groups = _groups(client, groups_prefix, timeout_s)
        committed = _committed(client, groups, timeout_s)
        partitions = sorted({(topic, p) for _, topic, p in committed})
        if not partitions:
            return []
        high = _offsets(client, partitions, OffsetSpec.latest(), timeout_s)  # type: ignore[no-untyped-call]
        low = _offsets(client, partitions, OffsetSpec.earliest(), timeout_s)  # type: ignore[no-untyped-call]
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
    tps = [(topic, p) for p in wanted]
    with broker_errors(f"could not read where group {group!r} stands on {topic!r}"):
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in wanted])]
        future = client.list_consumer_group_offsets(request, request_timeout=timeout_s)[group]
        committed = {
            tp.partition: tp.offset
            for tp in _wait(future, timeout_s).topic_partitions or []
            if tp.error is None and tp.offset >= 0
        }
        high = _offsets(client, tps, OffsetSpec.latest(), timeout_s)  # type: ignore[no-untyped-call]
        low = _offsets(client, tps, OffsetSpec.earliest(), timeout_s)  # type: ignore[no-untyped-call]
    found = {}
    for p in wanted:
        if (topic, p) in high:
            start = max(committed.get(p, 0), low.get((topic, p), 0))
            found[p] = (start, high[(topic, p)])
    return found


class LagReader:
    """``consumer_lag`` for fixed groups over one AdminClient, made on first use and kept."""

    def __init__(self, settings: KafkaSettings, groups_prefix: str | tuple[str, ...]) -> None:
        self.settings = settings
        self.groups_prefix = groups_prefix
        self._admin: AdminClient | None = None

    def __call__(self) -> list[LagRow]:
        if self._admin is None:
            self._admin = admin_client(self.settings)
        return consumer_lag(self.settings, self.groups_prefix, self._admin)


def _wait(future: Future[Any], timeout_s: float) -> Any:
    return future.result(timeout=timeout_s)


def _groups(client: AdminClient, prefix: str | tuple[str, ...], timeout_s: float) -> list[str]:
    listed = _wait(client.list_consumer_groups(request_timeout=timeout_s), timeout_s)
    if listed.errors:
        # Some broker did not answer (e.g. the cluster is unreachable and the request timed
        # out): the list is partial, and lag read from it would silently leave groups out.
        raise KafkaException(listed.errors[0])
    return sorted(g.group_id for g in listed.valid if g.group_id.startswith(prefix))


def _committed(
    client: AdminClient, groups: Iterable[str], timeout_s: float
) -> dict[tuple[str, str, int], int]:
    # The client asks for one group per request; send them all, then wait.
    futures = [
        (group, client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=timeout_s)[group])
        for group in groups
    ]  # fmt: skip
    committed = {}
    for group, future in futures:
        for tp in _wait(future, timeout_s).topic_partitions or []:
            if tp.error is None and tp.offset >= 0:
                committed[(group, tp.topic, tp.partition)] = tp.offset
    return committed


def _offsets(
    client: AdminClient, partitions: list[tuple[str, int]], spec: OffsetSpec, timeout_s: float
) -> dict[tuple[str, int], int]:
    request = {TopicPartition(topic, p): spec for topic, p in partitions}
    futures = client.list_offsets(request, request_timeout=timeout_s)
    found = {}
    for tp, future in futures.items():
        try:
            found[(tp.topic, tp.partition)] = _wait(future, timeout_s).offset
        except KafkaException:
            continue  # e.g. a topic deleted since the group committed to it
    return found
