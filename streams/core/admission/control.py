"""The two controls of a source's limits, as `control` carries them beside a stream's (the wire:
streams.wire.sources): set a source's limits, or delete them (the source is unlimited again).

A coordinator that handles one publishes the source's entry on the compacted `sources` view
(streams.coordinator.sources), which every coordinator reads whole; there is no per-source
state to decide on, so, unlike a stream's controls, these have no rules beyond the limits' own
(`SourceLimits`, checked when the value is built).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from streams.core.admission.limits import SourceLimits


@dataclass(frozen=True, slots=True)
class SourceSet:
    """Set a source's limits (all of them: a field left out takes its default)."""

    limits: SourceLimits

    @property
    def source(self) -> str:
        return self.limits.source


@dataclass(frozen=True, slots=True)
class SourceDelete:
    """Forget a source's limits: it behaves as a source that never had any (idempotent)."""

    source: str


SourceControl: TypeAlias = SourceSet | SourceDelete
