"""A stream's recent commits for the status page's timeline: a bounded tail of its partition.

The read model is built from the compacted `streams` and `bypassed` topics only, so that its
start costs O(streams), not O(history) (issue 12); `commits` is history. So the timeline reads
it on demand, for one selected stream at a time, and bounded:

- only the stream's partition of `commits` (keyed by stream id with murmur2, as every
  coordinator output), and of it only the last `tail_records` records (5,000), whatever the
  stream: a request costs the same at 100 or 100,000 streams;
- for at most `timeout_s` (2 s) per request; what was not reached is read by the next one;
- incrementally: a stream asked for again is read on from where its last read stopped (the
  page asks every few seconds), for the last `keep_streams` (8) streams asked for, each keeping
  its last `keep_windows` (200) windows.

Why these bounds: 5,000 commits of a few hundred bytes are about 1.5 MB, well under a second
to read, and 2 s keeps a slow broker from stalling the page (requests wait for one another).
So the strip shows what the last 5,000 commits of the partition hold: for a stream that
commits once a minute among 1,000 streams on 6 partitions, about half an hour; among 100,000,
about 20 s, often no window at all. The answer says what was read (`Recent`), and so does the
page. Bypassed windows older than that still show while listed (from the read model).
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Protocol

from streams.core import CommittedWindow
from streams.dashboard.timeline import Recent
from streams.errors import InvalidInput, TidemarkError
from streams.kafka.partitioner import partition_of
from streams.kafka.settings import KafkaSettings
from streams.kafka.tail import PartitionTail
from streams.kafka.topic_io import TopicRecord
from streams.wire import decode_commit, stream_key

TAIL_RECORDS = 5_000
TIMEOUT_S = 2.0
KEEP_STREAMS = 8
KEEP_WINDOWS = 200


class Tail(Protocol):
    """What is read of `commits` (streams.kafka.tail.PartitionTail; a fake in unit tests)."""

    def bounds(self, timeout_s: float) -> dict[int, tuple[int, int]]: ...
    def read(
        self, partition: int, start: int, end: int, timeout_s: float
    ) -> tuple[list[TopicRecord], int]: ...
    def close(self) -> None: ...


@dataclass
class _Seen:
    """What was read of one stream's partition so far."""

    partition: int
    from_offset: int
    position: int
    windows: deque[tuple[CommittedWindow, int]] = field(default_factory=deque)


class KafkaCommitHistory:
    """`recent(stream_id)` over the `commits` topic; one read at a time (request threads wait)."""

    def __init__(
        self,
        settings: KafkaSettings,
        topic: str,
        tail_records: int = TAIL_RECORDS,
        timeout_s: float = TIMEOUT_S,
        keep_streams: int = KEEP_STREAMS,
        keep_windows: int = KEEP_WINDOWS,
        tail: Tail | None = None,
    ) -> None:
        self.tail_records = tail_records
        self.timeout_s = timeout_s
        self.keep_streams = keep_streams
        self.keep_windows = keep_windows
        self._tail = tail or PartitionTail(settings, topic, "tidemark-dashboard-timeline")
        self._seen: OrderedDict[str, _Seen] = OrderedDict()
        self._lock = threading.Lock()

    def recent(self, stream_id: str) -> Recent:
        """The stream's committed windows in the bounded tail, read on to the partition's end
        (or for `timeout_s`); a broker error is reported in the answer, not raised."""
        with self._lock:
            try:
                return self._read(stream_id)
            except TidemarkError as exc:
                self._seen.pop(stream_id, None)
                return Recent(limit=self.tail_records, error=str(exc)[:500])

    def _read(self, stream_id: str) -> Recent:
        bounds = self._tail.bounds(self.timeout_s)
        if not bounds:  # no `commits` topic yet: nothing was ever committed
            return Recent(limit=self.tail_records)
        key = stream_key(stream_id)
        partition = partition_of(key, len(bounds))
        low, end = bounds[partition]
        seen = self._seen.pop(stream_id, None)
        tail_start = max(low, end - self.tail_records)
        if seen is None or seen.partition != partition or not low <= seen.position <= end:
            seen = _Seen(partition, tail_start, tail_start, windows=deque(maxlen=self.keep_windows))
        elif seen.position < tail_start:  # more came since than a tail: skip to the tail
            seen.position = seen.from_offset = tail_start
        self._seen[stream_id] = seen  # the most recently asked for last
        while len(self._seen) > self.keep_streams:
            self._seen.popitem(last=False)
        records, seen.position = self._tail.read(partition, seen.position, end, self.timeout_s)
        for record in records:
            if record.key != key:
                continue
            try:
                commit = decode_commit(record.value)
            except InvalidInput:
                continue  # not what a coordinator writes: nothing to show
            seen.windows.extend((w, commit.committed_ms) for w in commit.windows)
        return Recent(
            tuple(seen.windows),
            partition,
            seen.from_offset,
            seen.position,
            seen.position - seen.from_offset,
            seen.position >= end,
            self.tail_records,
        )

    def close(self) -> None:
        with self._lock:
            self._tail.close()
            self._seen.clear()
