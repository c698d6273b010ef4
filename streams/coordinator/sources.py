"""A source's controls, as the coordinator applies them: a `source_set` publishes the source's
limits on the compacted `sources` view, a `source_delete` its tombstone.

The view is the limits' only store: every coordinator reads it whole (streams.coordinator.
limits_table), so there is no per-source state here and nothing to decide. The limits were
checked when the control was decoded (an invalid one never gets here: it is rejected naming the
field, as a bad upsert is). The record goes out through the engine's emitter, so it joins the
event's unit of work: under the confluent engine, the transaction that also moves `control`'s
offset (the view changes exactly once per control); under Faust, the output producer, with no
delivery callback: a control handled again after a crash publishes the same limits again (a
later `updated_ms`), and a record the producer gives up (after its delivery timeout; logged)
is lost, as nothing sends it again. `tidemark sources set` then says no coordinator applied
it, and running it again puts it right. Deleting a source without limits sends a tombstone all
the same: harmless, and idempotent.
"""

from __future__ import annotations

import logging
from collections import Counter

from streams.coordinator.ports import Emitter
from streams.core.admission import SourceControl, SourceSet
from streams.topics import Topics
from streams.wire import encode_source_view, source_view_key

log = logging.getLogger("streams.coordinator")


class SourceControls:
    """Applies `source_set` and `source_delete` for the Inputs (streams.coordinator.inputs)."""

    def __init__(self, topics: Topics, emitter: Emitter, stats: Counter[str]) -> None:
        self._topic = topics.sources
        self._emitter = emitter
        self._stats = stats

    def apply(self, control: SourceControl, now_ms: int) -> None:
        """Send the source's entry (or its tombstone) on `sources`."""
        source = control.source
        if isinstance(control, SourceSet):
            value: bytes | None = encode_source_view(control.limits, now_ms)
            self._stats["source_sets"] += 1
            log.info("source %r: limits set to %s", source, control.limits)
        else:
            value = None
            self._stats["source_deletes"] += 1
            log.info("source %r: limits deleted", source)
        self._emitter.send(self._topic, source_view_key(source), value)
