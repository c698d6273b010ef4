"""What a stream created now has to catch up on: a warning before a large backlog, shown by
`tidemark streams create` before it sends anything."""

from __future__ import annotations

from typing import Any

from streams.humanize import format_duration_rounded

# More windows than this already due at creation is a backlog worth a warning.
BACKLOG_WARNING_WINDOWS = 10_000


def backlog_warning(config: dict[str, Any], now_ms: int) -> str | None:
    """What a stream created now has to catch up on, when more than BACKLOG_WARNING_WINDOWS
    windows are due already: how many, and how many rounds at its max_in_flight."""
    step = config["step_ms"]
    origin = config["start_ms"] - config["start_ms"] % step
    last_end = now_ms - config["delay_ms"]
    if config["end_ms"] is not None:
        last_end = min(last_end, config["end_ms"])
    due = max(0, (last_end - origin - config["window_ms"]) // step + 1)
    if due <= BACKLOG_WARNING_WINDOWS:
        return None
    in_flight = config["max_in_flight"]
    rounds = -(-due // in_flight)
    return (
        f"a backlog of {due:,} windows is due at once; at --max-in-flight {in_flight} that is "
        f"{rounds:,} rounds of tasks, about {format_duration_rounded(rounds * 1_000)} if each "
        "takes 1 s (a later --start, or a larger --max-in-flight, shortens it)"
    )
