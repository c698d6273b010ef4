"""The scavenger's rules (streams.core.retention): when a stream has work, what expires."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.core import BypassRecord, StreamConfig, StreamState
from streams.core import replay as lane
from streams.core.replay import Listed, ReplayState
from streams.core.retention import expire_bypasses, oldest_bypass_ms, scavenge_due_ms

T0 = 1_795_946_400_000
MIN = 60_000


def window(start: int, bypassed_ms: int, **extra: object) -> Listed:
    return Listed(start, start + MIN, 1, start + MIN, bypassed_ms, None, **extra)  # type: ignore[arg-type]


def test_the_oldest_window_not_being_replayed_sets_when_the_stream_has_work() -> None:
    replays = ReplayState("s", [window(T0, T0 + 5, attempt=2), window(T0 + MIN, T0 + 9)])
    assert oldest_bypass_ms(replays) == T0 + 9  # the one in flight does not count
    assert oldest_bypass_ms(ReplayState("s")) is None
    state = StreamState(StreamConfig("s", T0, bypass_retention_ms=100, gc_grace_ms=50), T0, T0, T0)
    assert scavenge_due_ms(state, None) is None  # running, nothing listed: no work
    assert scavenge_due_ms(state, T0 + 9) == T0 + 109
    state.finished_ms = T0 + 20
    assert scavenge_due_ms(state, T0 + 9) == T0 + 70  # collection first
    assert scavenge_due_ms(state, None) == T0 + 70


def test_only_windows_past_retention_and_not_being_replayed_expire() -> None:
    replays = ReplayState(
        "s",
        [window(T0, T0), window(T0 + MIN, T0, queued=True), window(T0 + 2 * MIN, T0 + 50)],
    )
    assert expire_bypasses(replays, 100, T0 + 99) == ()
    assert expire_bypasses(replays, 100, T0 + 100) == (T0,)
    assert [w.start_ms for w in replays.listed] == [T0 + MIN, T0 + 2 * MIN]


def test_windows_beyond_the_listing_bound_are_returned_for_tombstones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lane, "MAX_LISTED", 2)
    replays = ReplayState("s")
    dropped = [
        lane.note_bypass(
            replays, BypassRecord("s", T0 + i * MIN, T0 + (i + 1) * MIN, 1, 0, 0, None)
        )
        for i in range(3)
    ]
    assert dropped == [[], [], [T0]]
    assert [w.start_ms for w in replays.listed] == [T0 + MIN, T0 + 2 * MIN]


@given(
    st.lists(st.tuples(st.integers(0, 10**6), st.booleans()), max_size=30),
    st.integers(1, 10**6),
    st.integers(0, 2 * 10**6),
)
def test_expiry_keeps_exactly_the_young_and_the_busy(
    windows: list[tuple[int, bool]], retention_ms: int, now_ms: int
) -> None:
    replays = ReplayState(
        "s", [window(i * MIN, at, queued=busy) for i, (at, busy) in enumerate(windows)]
    )
    expired = expire_bypasses(replays, retention_ms, now_ms)
    kept = {w.start_ms for w in replays.listed}
    for i, (at, busy) in enumerate(windows):
        old = at + retention_ms <= now_ms
        assert (i * MIN in expired) == (old and not busy)
        assert (i * MIN in kept) == (not old or busy)
    oldest = oldest_bypass_ms(replays)
    assert oldest is None or oldest + retention_ms > now_ms
