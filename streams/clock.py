"""The wall clock, once: epoch milliseconds, what every time on the wire is compared with.

Code that decides by time takes ``now_ms`` as an argument or a ``Callable[[], int]`` defaulting
to this function, so that tests pass their own time instead of patching a clock.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    """Epoch milliseconds now."""
    return time.time_ns() // 1_000_000
