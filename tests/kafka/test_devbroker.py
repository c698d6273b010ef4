"""The local broker launcher's pure parts."""

from __future__ import annotations

import re

from streams.devbroker import new_cluster_id


def test_cluster_ids_are_22_base64_characters_never_starting_with_a_dash() -> None:
    ids = {new_cluster_id() for _ in range(5000)}  # about 78 would start with "-" unchecked
    assert len(ids) == 5000
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", i) for i in ids)
