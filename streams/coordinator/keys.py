"""The key check of every input of `control` and `results`: the key must be what the value says
it is for (a stream's id as UTF-8, or a source's control key), in the partition murmur2 gives it.
One rule for both, so that a stream's inputs meet its state and one source's controls stay in
order in one partition."""

from __future__ import annotations

from streams.coordinator.records import RECORD_CACHE_SIZE
from streams.errors import InvalidInput
from streams.kafka.partitioner import partition_of
from streams.wire import source_control_key


class KeyCheck:
    """Checks an input's key and partition; each key's partition is memoized."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._placed: dict[bytes, int] = {}

    def check(self, name: str, key: bytes | None, partition: int, source: bool = False) -> None:
        """`key` must be the stream id `name` as UTF-8 (`source`: the control key of the source
        `name`, which no stream's key is), and `partition` the one murmur2 places it in; else
        InvalidInput naming `key` or `partition`."""
        expected = source_control_key(name) if source else name.encode()
        if key != expected:
            what = "0xFF + 'source:' + the source" if source else "the stream_id"
            raise InvalidInput("key", f"must be {what} {name!r} as UTF-8")
        placed = self._placed
        owner = placed.get(expected)
        if owner is None:
            owner = partition_of(expected, self.partitions)
            if len(placed) >= 2 * RECORD_CACHE_SIZE:
                placed.clear()  # keys of rejected inputs must not grow it forever
            placed[expected] = owner
        if owner != partition:
            raise InvalidInput(
                "partition",
                f"key {'of source ' if source else ''}{name!r} belongs to partition {owner} of "
                f"{self.partitions}, not {partition}; produce with the murmur2 partitioner "
                "(confluent-kafka: partitioner=murmur2_random)",
            )
