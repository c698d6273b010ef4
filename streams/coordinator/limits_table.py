"""An engine's reader of the sources' limits: the compacted `sources` view (streams.wire.sources)
read whole by a GlobalTable, as the outage guard reads `health` (streams.coordinator.guard).

Apart from the Processor, which takes the callable alone and so loads no Kafka client.
"""

from __future__ import annotations

from collections.abc import Callable

from streams.coordinator.settings import CoordinatorSettings
from streams.core.admission import SourceLimits
from streams.kafka.global_table import GlobalTable
from streams.wire import decode_source_view

LatestLimits = Callable[[], dict[str, SourceLimits]]


def limits_table(
    settings: CoordinatorSettings,
) -> tuple[GlobalTable[SourceLimits], LatestLimits]:
    """The table over `sources` (start it, stop it when the engine stops) and a callable giving
    the latest limits per source. A source without an entry has no limits
    (`SourceLimits.unlimited`); until the table is read (`caught_up()`), none has."""
    table = GlobalTable(settings.kafka, settings.topics.sources, decode_source_view)

    def latest() -> dict[str, SourceLimits]:
        return {limits.source: limits for limits in table.snapshot().values()}

    return table, latest
