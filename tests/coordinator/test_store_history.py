"""The rule for resuming a local store from its changelog offset, alone."""

from __future__ import annotations

from streams.coordinator.store_history import StoreMark, distrust

KEPT_MS = 86_400_000  # delete.retention.ms


def test_a_store_of_this_history_younger_than_half_the_retention_is_trusted() -> None:
    assert distrust(StoreMark("h", 10, 1_000), "h", KEPT_MS, 1_000 + KEPT_MS // 2 - 1) is None


def test_an_empty_store_is_trusted_whatever_it_records() -> None:
    """It holds nothing, so it reads the changelog from the start anyway."""
    assert distrust(StoreMark(None, -1, None), "h", KEPT_MS, 0) is None
    assert distrust(StoreMark("other", -1, 0), "h", KEPT_MS, 10 * KEPT_MS) is None


def test_each_reason_names_what_cannot_be_proven() -> None:
    cases = {
        StoreMark(None, 10, 1_000): "does not record which changelog",
        StoreMark("old", 10, 1_000): "topic id old, now h",
        StoreMark("h", 10, None): "does not record when",
        StoreMark("h", 10, 1_000 - KEPT_MS // 2): "tombstones after its offset 10 may be gone",
    }
    for mark, said in cases.items():
        why = distrust(mark, "h", KEPT_MS, 1_000)
        assert why is not None and said in why, (mark, why)
