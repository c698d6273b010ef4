"""When a local store may go on from the changelog offset it holds, and when it must be restored
whole: the rule, apart from RocksDB and Kafka so that it can be read (and tested) in one place.

A store resumed from offset N gets every record after N replayed over it, so it ends right
only if the changelog still holds, after N, every change made since N. Two things break that:

- **Another history.** A changelog deleted and re-created starts again at offset 0; once it
  grows past N, an offset check passes, and the store keeps the old history's keys and misses
  the new history's early writes. So a store records the changelog's topic id (its history)
  and is trusted only by a changelog of the same id.
- **Compacted tombstones.** Compaction drops a key's older records (harmless: the newest comes
  after N or is already in the store) and, once they are `delete.retention.ms` old, its
  tombstones. A tombstone written after N and then removed leaves a deleted key alive in the
  store. Kafka keeps a tombstone at least `delete.retention.ms` after its append (its delete
  horizon counts from its first cleaning, KIP-534; older brokers count from its segment's last
  write), so every record after N is still in the log while the store is younger than that.
  A store therefore records `since_ms`, a time no later than the append of any record after N
  (the start of the transaction that wrote N, or of the restore that read to N), and is
  trusted only while `now_ms - since_ms` is under half of `delete.retention.ms`: the other half
  is room for the broker's clock against ours. Kafka Streams relies on the same bound without
  checking it (its `state.cleanup.delay.ms`, 10 min, is far below the 1-day default); a store of
  a coordinator that was down longer is restored whole here.

The stores of partitions revoked from this process are deleted CLEANUP_DELAY_MS later
(TransactionalState.tidy), so that a disk does not keep every partition it ever held.

The cost: a store older than that (a partition away from this process, or not written, for
half a day at the default) is restored whole, as after a lost disk.
"""

from __future__ import annotations

from dataclasses import dataclass

# Kafka Streams' state.cleanup.delay.ms and its default: a partition revoked from this process
# keeps its store this long, in case it comes back (a rebalance that moves it away and back).
CLEANUP_DELAY_MS = 600_000


@dataclass(frozen=True)
class StoreMark:
    """What a local store says it reflects."""

    history: str | None  # the changelog's topic id; None: not recorded (an older store)
    offset: int  # the last changelog offset applied; -1: none
    since_ms: int | None  # no later than the append of any record after `offset`


def distrust(mark: StoreMark, history: str, tombstones_kept_ms: int, now_ms: int) -> str | None:
    """Why a store holding `mark` cannot go on from its offset in the changelog of `history`
    whose tombstones are kept `tombstones_kept_ms` (delete.retention.ms); None if it can (the
    offset must still lie in the log: ChangelogReader.resume_at checks that)."""
    if mark.offset < 0:
        return None  # it holds nothing: reading from the start is a whole restore anyway
    if mark.history is None:
        return "it does not record which changelog it reflects (a store of an older version)"
    if mark.history != history:
        return (
            f"it reflects another changelog (topic id {mark.history}, now {history}): "
            "the topic was re-created"
        )
    if mark.since_ms is None:
        return "it does not record when it was written"
    age_ms = now_ms - mark.since_ms
    if age_ms >= tombstones_kept_ms // 2:
        return (
            f"it is {age_ms} ms old, at least half of the changelog's delete.retention.ms "
            f"({tombstones_kept_ms}): tombstones after its offset {mark.offset} may be gone"
        )
    return None
