"""The clocks, once: the wall clock (epoch milliseconds, what every time on the wire is compared
with) and a monotonic one (milliseconds from an arbitrary origin, for intervals inside a process).

Code that decides by time takes ``now_ms`` as an argument or a ``Callable[[], int]`` defaulting
to one of these functions, so that tests pass their own time instead of patching a clock. A step
of the wall clock (NTP, an operator) moves ``now_ms`` and never ``monotonic_ms``.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    """Epoch milliseconds now."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Monotonic milliseconds: only differences mean anything, and they never go back."""
    return time.monotonic_ns() // 1_000_000
