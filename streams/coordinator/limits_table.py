"""An engine's reader of the sources' limits: the compacted `sources` view (streams.wire.sources)
read whole by a GlobalTable, as the outage guard reads `health` (streams.coordinator.guard).

Apart from the Processor, which takes the callable alone and so loads no Kafka client.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from streams.coordinator.settings import CoordinatorSettings
from streams.core.admission import SourceLimits
from streams.kafka.global_table import GlobalTable
from streams.wire import decode_source_view

log = logging.getLogger("streams.coordinator")

# The latest limits per source; None while they are not known yet (see `limits_table`).
LatestLimits = Callable[[], dict[str, SourceLimits] | None]


def limits_table(
    settings: CoordinatorSettings, clock_s: Callable[[], float] = time.monotonic
) -> tuple[GlobalTable[SourceLimits], LatestLimits]:
    """The table over `sources` (start it, stop it when the engine stops) and a callable giving
    the latest limits per source. A source without an entry has no limits
    (`SourceLimits.unlimited`). Until the table is read to its end (`caught_up()`) the limits
    are not known (None: admission then admits no window of a source, streams.coordinator
    .admission), since a source read as unlimited would let a starting coordinator dispatch
    past its cap. Should the table stay unread for `health_stale_ms` from the first ask, the
    limits read so far are taken (logged), as the outage guard does with `health`."""
    table = GlobalTable(settings.kafka, settings.topics.sources, decode_source_view)
    wait_s = settings.health_stale_ms / 1000
    first_asked_s: float | None = None  # when the limits were first asked for
    said = False  # the fallback's warning, once

    def latest() -> dict[str, SourceLimits] | None:
        nonlocal first_asked_s, said
        if not table.caught_up():
            now_s = clock_s()
            if first_asked_s is None:
                first_asked_s = now_s
            waited_s = now_s - first_asked_s
            if waited_s < wait_s:
                return None
            if not said:
                said = True
                log.warning("the sources topic is not read to its end %.0f s after admission first "
                            "asked for it; admission uses the limits read so far",
                            waited_s)  # fmt: skip
        return {limits.source: limits for limits in table.snapshot().values()}

    return table, latest
