"""An engine's outage guard: SourceHealth (streams.coordinator.health) over the `health` topic,
read whole by a GlobalTable. Apart from SourceHealth, so that the Processor, which uses the
guard's rule but not its reader, loads no Kafka client."""

from __future__ import annotations

from streams.coordinator.health import SourceHealth
from streams.coordinator.settings import CoordinatorSettings
from streams.kafka.global_table import GlobalTable
from streams.wire import HealthMessage, decode_health


def guard(settings: CoordinatorSettings) -> tuple[SourceHealth, GlobalTable[HealthMessage]]:
    """An engine's outage guard: its SourceHealth over the `health` topic read whole (start the
    table, stop it when the engine stops)."""
    table = GlobalTable(settings.kafka, settings.topics.health, decode_health)
    health = SourceHealth(
        settings.outage,
        settings.instance,
        table.snapshot,
        settings.health_publish_ms,
        settings.health_stale_ms,
        table.caught_up,
    )
    return health, table
