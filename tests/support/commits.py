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
