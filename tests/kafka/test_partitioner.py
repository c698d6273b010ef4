"""The pure murmur2 partitioner agrees with aiokafka's (which Faust uses) on every key."""

from __future__ import annotations

import random

from aiokafka.partitioner import murmur2 as aiokafka_murmur2

from streams.kafka.partitioner import murmur2, partition_of


def random_keys(count: int) -> list[bytes]:
    rng = random.Random(20261201)
    alphabet = "abcxyz-_/0123456789é中文🙂\u0000\uffff"
    keys = [b"", b"a", b"ab", b"abc", b"abcd", b"cluster-a", "ünïcødé-🙂".encode()]
    while len(keys) < count:
        if rng.random() < 0.5:
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
            keys.append(text.encode())
        else:
            keys.append(rng.randbytes(rng.randint(0, 64)))
    return keys


def test_murmur2_equals_aiokafka_on_random_keys_including_unicode() -> None:
    keys = random_keys(2000)
    assert any(any(b >= 0x80 for b in k) for k in keys)  # multi-byte UTF-8 is covered
    assert [murmur2(k) for k in keys] == [aiokafka_murmur2(k) for k in keys]


def test_partition_of_places_keys_like_the_default_partitioner() -> None:
    for key in random_keys(1000):
        for partitions in (1, 3, 6, 32):
            expected = (aiokafka_murmur2(key) & 0x7FFFFFFF) % partitions
            assert partition_of(key, partitions) == expected
            assert partition_of(key, partitions) == expected  # the memoized answer too
