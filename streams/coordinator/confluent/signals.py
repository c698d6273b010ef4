"""SIGTERM and SIGINT served on a thread of their own, whatever the main thread is doing.

Python runs a signal handler on the main thread, between two bytecodes. The confluent engine's
loop spends its time in librdkafka calls that release the GIL but can block for seconds with
the broker gone (one `send_offsets_to_transaction`, given 1 s, was seen to wait 10 s for its
request to time out), so a handler started the stop deadline only once that call returned, and
the stop took longer than the README promises (10 s). A thread blocked in `sigwait` receives
them instead, at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})


def block_stop_signals() -> None:
    """Block SIGTERM and SIGINT in this thread and in every thread it starts from now on
    (librdkafka's included: a thread inherits its starter's signal mask). Call it before any
    thread is started; until `serve_stop_signals`, those signals wait, pending."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def serve_stop_signals(request_stop: Callable[[], None]) -> threading.Thread:
    """Call `request_stop` on a thread of its own for every SIGTERM or SIGINT, those pending
    since `block_stop_signals` first."""

    def serve() -> None:
        while True:
            signal.sigwait(STOP_SIGNALS)
            request_stop()

    thread = threading.Thread(target=serve, name="stop-signals", daemon=True)
    thread.start()
    return thread


def stop_signal_within(timeout_s: float) -> bool:
    """Wait up to `timeout_s` for a SIGTERM or SIGINT blocked by `block_stop_signals` (before
    they are served); return whether one came. It is consumed: the caller stops."""
    return signal.sigtimedwait(STOP_SIGNALS, timeout_s) is not None
