"""What a consumer of `commits` may see, as checks: exactly once, in order, without a gap."""

from __future__ import annotations

from typing import Any


def check_exactly_once(commits: list[dict[str, Any]], start_ms: int) -> int:
    """Each commit starts where the last one ended and no window is announced twice.

    Replayed windows (which never move `downstream_ms`) are left out. Returns the last mark.
    """
    mark = start_ms
    for commit in commits:
        windows = commit["windows"]
        if windows and all(w["reason"] == "replayed" for w in windows):
            continue
        assert commit["previous_ms"] == mark, f"a repeat or a gap after {mark}: {commit}"
        covered = mark
        for window in windows:
            assert window["start_ms"] == covered, f"windows do not tile: {commit}"
            covered = window["end_ms"]
        assert covered == commit["downstream_ms"] > mark, f"bad coverage: {commit}"
        mark = covered
    return mark


def check_chain(commits: list[dict[str, Any]], exact: bool = True) -> None:
    """One stream's commits, in topic order, replayed ones included, form one chain.

    Each commit starts at the mark the one before left (`exact`; at least once, after a crash
    or a failed delivery, a repeat may start below it, never above: no gap) and
    `downstream_ms` never goes back. A commit of `replayed` windows moves nothing (previous ==
    downstream == the mark) and each of its windows was announced as a bypass before, at or
    below the mark.
    """
    mark: int | None = None
    bypassed: set[tuple[int, int]] = set()
    for commit in commits:
        previous, downstream = commit["previous_ms"], commit["downstream_ms"]
        windows = commit["windows"]
        if mark is not None:
            if exact:
                assert previous == mark, f"previous_ms is not the mark {mark}: {commit}"
            else:
                assert previous <= mark, f"a gap after the mark {mark}: {commit}"
            assert downstream >= mark, f"downstream_ms went back from {mark}: {commit}"
        if any(w["reason"] == "replayed" for w in windows):
            assert all(w["reason"] == "replayed" for w in windows), f"mixed: {commit}"
            assert previous == downstream, f"a replayed commit moved the mark: {commit}"
            for w in windows:
                assert (w["start_ms"], w["end_ms"]) in bypassed, f"replayed before bypass: {w}"
                assert w["end_ms"] <= downstream, f"replayed past the mark: {commit}"
        for w in windows:
            if w["reason"] == "bypass":
                bypassed.add((w["start_ms"], w["end_ms"]))
        mark = downstream if mark is None else max(mark, downstream)
