"""Kafka's default key partitioner (murmur2, as the Java client, aiokafka and Faust use it).

Pure Python with no client library, so that the coordinator, its tests and its store can place a
key without importing aiokafka. A key's partition is memoized: a stream's id is placed on every
input, and murmur2 in Python costs microseconds.
"""

from __future__ import annotations

from struct import iter_unpack
from typing import Final

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_MASK: Final = 0xFFFFFFFF
# Memoized placements; cleared when full (keys of rejected garbage must not grow it forever).
_CACHE_MAX: Final = 500_000
_placed: dict[tuple[bytes, int], int] = {}


def murmur2(data: bytes) -> int:
    """The 32-bit MurmurHash2 of `data`, unsigned, as `org.apache.kafka.common.utils.Utils`."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    body = length & ~3
    for (k,) in iter_unpack("<I", data[:body]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    extra = length & 3
    if extra >= 3:
        h ^= data[body + 2] << 16
    if extra >= 2:
        h ^= data[body + 1] << 8
    if extra >= 1:
        h ^= data[body]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_of(key: bytes, partitions: int) -> int:
    """The partition the Java client, aiokafka and Faust give `key` among `partitions`."""
    placed = _placed.get((key, partitions))
    if placed is None:
        placed = (murmur2(key) & 0x7FFFFFFF) % partitions
        if len(_placed) >= _CACHE_MAX:
            _placed.clear()
        _placed[(key, partitions)] = placed
    return placed
