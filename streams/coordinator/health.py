"""The outage guard across partitions and coordinators (the pure rule: streams.core.outage).

Each coordinator counts, per partition it owns and per source, its failing and total streams
(`note`, after every decision), and publishes them every `publish_ms` to the compacted
`{prefix}.health` topic, keyed by partition (`entries`): with the confluent engine inside the
open transaction, so the counts commit with the state they describe; with Faust through its
output producer. Every coordinator reads that topic whole (streams.kafka.global_table) and
`refresh` sums, per source, its own partitions' live counts with the other partitions' entries.
The reader is an engine's (streams.coordinator.guard): this module, which the Processor uses,
imports no Kafka client.
An entry older than `stale_ms` (a partition whose owner died and that no one owns yet) no longer
counts; a new owner replaces it once it has rebuilt the partition. `stale_ms` is on the wall
clock of the publisher against the reader's: keep the hosts' clocks in step (NTP).

When a source leaves outage, `refresh` returns the local streams it holds, for their next tick
to release them (streams.core.outage.release) inside their partition.

The guard **knows** a source's state only once every partition it owns is rebuilt (`expect`,
then `built`) and its reader has read the `health` topic to its end (`caught_up`), and a
`refresh` has decided from that. Until then (a start, a restart after any downtime, a new
partition, an abort), `hold_ms` holds every stream that names a source and nothing is
released: a stream whose source is in outage must not be bypassed because its counts were not
read yet (after a restart longer than `stale_ms` even its own partitions' entries are stale).
This only postpones a bypass by the seconds the guard takes to know, and a hold it starts in a
source that turns out healthy is released at once (its window then bypasses at its next
failure, its budget being spent). Should `health` stay unread for `stale_ms` after the
partitions are rebuilt, the guard decides from what it has (logged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from streams.core import OutagePolicy, SourceCounts, StreamState, in_outage, is_failing
from streams.core.outage import held_in_flight_before, hold_started_ms
from streams.wire import (
    HealthMessage,
    SourceCountsModel,
    encode_health,
    health_key,
)

log = logging.getLogger("streams.coordinator")

DEFAULT_PUBLISH_MS = 1_000
DEFAULT_STALE_MS = 30_000


@dataclass(frozen=True, slots=True)
class Outage:
    """A source in outage, as this coordinator sees it."""

    source: str
    failing: int
    total: int
    since_ms: int  # when this coordinator first saw it in outage
    held: int  # streams of it this coordinator holds


# partition -> stream_id -> (source, failing, held)
_Streams = dict[int, dict[str, tuple[str, bool, bool]]]


class SourceHealth:
    def __init__(
        self,
        policy: OutagePolicy,
        owner: str,
        view: Callable[[], Mapping[bytes, HealthMessage]] = dict,
        publish_ms: int = DEFAULT_PUBLISH_MS,
        stale_ms: int = DEFAULT_STALE_MS,
        caught_up: Callable[[], bool] = lambda: True,
    ) -> None:
        """`view`: the `health` topic's latest entry per key; `caught_up`: whether that view
        has been read to the topic's end once (see the module's docstring)."""
        self.policy = policy
        self.owner = owner
        self.publish_ms = publish_ms
        self.stale_ms = stale_ms
        self._view = view
        self._caught_up = caught_up
        self._expected: set[int] = set()  # owned partitions (built or to be rebuilt)
        self._known = False  # a refresh decided with every count in: see `known`
        self._unknown_since_ms: int | None = None  # the first refresh that could not know
        self._streams: _Streams = {}
        self._counts: dict[int, dict[str, list[int]]] = {}  # partition -> source -> [f, t]
        self._held: dict[str, int] = {}  # source -> local streams with a held window
        self._built: set[int] = set()
        self._outages: dict[str, Outage] = {}
        self._recovered_ms: dict[str, int] = {}  # source -> when it last left outage
        self._published_ms: int | None = None

    # -- local counts --------------------------------------------------------------------

    def note(self, partition: int, stream_id: str, state: StreamState | None) -> None:
        """The stream's state after a decision (None: deleted)."""
        if state is None or state.config.source is None:
            self.note_counts(partition, stream_id, None, False, False)
            return
        failing, held = is_failing(state), hold_started_ms(state) is not None
        self.note_counts(partition, stream_id, state.config.source, failing, held)

    def note_counts(
        self, partition: int, stream_id: str, source: str | None, failing: bool, held: bool
    ) -> None:
        """`note`, from what the stream's state says: its source (None: none, or deleted),
        whether it is failing and whether a window of it is held."""
        streams = self._streams.get(partition)
        old = None if streams is None else streams.get(stream_id)
        if source is None:
            if old is not None and streams is not None:
                del streams[stream_id]
                self._count(partition, old, -1)
            return
        new = (source, failing, held)
        if new == old:
            return
        if streams is None:
            streams = self._streams[partition] = {}
        streams[stream_id] = new
        if old is not None:
            self._count(partition, old, -1)
        self._count(partition, new, 1)

    def _count(self, partition: int, entry: tuple[str, bool, bool], sign: int) -> None:
        sources = self._counts.setdefault(partition, {})
        counts = sources.setdefault(entry[0], [0, 0])
        counts[0] += sign * entry[1]
        counts[1] += sign
        if counts[1] == 0:
            del sources[entry[0]]
        if entry[2]:
            held = self._held[entry[0]] = self._held.get(entry[0], 0) + sign
            if not held:
                del self._held[entry[0]]

    def expect(self, partitions: Iterable[int]) -> None:
        """Partitions assigned (or to be rebuilt after an abort): until they are `built`, the
        guard does not know its sources' state."""
        self._expected.update(partitions)
        self._known = False
        self._unknown_since_ms = None

    def built(self, partitions: set[int]) -> None:
        """Every stream of `partitions` has been noted: their counts are complete."""
        self._built |= partitions

    def forget(self, partitions: set[int]) -> None:
        """Partitions gone (revoked, or to be rebuilt): their counts are no longer this one's."""
        for p in partitions:
            for entry in self._streams.pop(p, {}).values():
                self._count(p, entry, -1)
            self._counts.pop(p, None)
            self._built.discard(p)
            self._expected.discard(p)

    # -- the decision --------------------------------------------------------------------

    @property
    def known(self) -> bool:
        """Whether the last `refresh` decided with every count in (see the module's docstring);
        until then every stream that names a source is held."""
        return self._known

    def hold_ms(self, state: StreamState) -> int:
        """The `max_hold_ms` to decide the stream with: 0 unless its source is in outage, or
        the guard does not know yet whether it is, or a held window of it still waits for the
        result of an attempt sent before its source recovered (a failure from the outage,
        read after it ended: results of other partitions, or of a lagging worker, come late)."""
        source = state.config.source
        if source is None:
            return 0
        if self._known and source not in self._outages:
            recovered_ms = self._recovered_ms.get(source)
            if recovered_ms is None or not held_in_flight_before(state, recovered_ms):
                return 0
        return self.policy.max_hold_ms

    def totals(self, now_ms: int) -> dict[str, SourceCounts]:
        """Per source, its failing and total streams over every partition with a fresh entry."""
        sums: dict[str, list[int]] = {}
        for p in self._built:
            for source, (failing, total) in self._counts.get(p, {}).items():
                acc = sums.setdefault(source, [0, 0])
                acc[0] += failing
                acc[1] += total
        for entry in self._view().values():
            if entry.partition in self._built or now_ms - entry.published_ms >= self.stale_ms:
                continue
            for source, c in entry.sources.items():
                acc = sums.setdefault(source, [0, 0])
                acc[0] += c.failing
                acc[1] += c.total
        return {source: SourceCounts(f, t) for source, (f, t) in sums.items()}

    def _can_know(self, now_ms: int) -> bool:
        """Whether every owned partition is rebuilt and `health` read to its end (or it has
        not been for `stale_ms` since the partitions were: then decide from what there is)."""
        if not self._expected <= self._built:
            self._unknown_since_ms = None  # the bound counts from the rebuild
            return False
        if self._caught_up():
            return True
        since_ms = self._unknown_since_ms
        if since_ms is None:
            self._unknown_since_ms = now_ms
            return False
        if now_ms - since_ms < self.stale_ms:
            return False
        log.warning(
            "the health topic is not read to its end %d ms after the rebuild; the outage "
            "guard decides from the counts it has",
            now_ms - since_ms,
        )
        return True

    def refresh(self, now_ms: int) -> list[tuple[int, str]]:
        """Decide every source again; the local held streams whose source left outage (at the
        refresh that first knows, those of every source not in outage)."""
        first = not self._known
        if first and not self._can_know(now_ms):
            return []
        self._known = True
        self._unknown_since_ms = None
        before = self._outages
        after: dict[str, Outage] = {}
        held = self._held
        for source, counts in self.totals(now_ms).items():
            if in_outage(counts, self.policy):
                since_ms = before[source].since_ms if source in before else now_ms
                after[source] = Outage(
                    source, counts.failing, counts.total, since_ms, held.get(source, 0)
                )
        self._outages = after
        ended = (set(self._held) if first else set(before)) - set(after)
        recovered = self._recovered_ms
        for source in ended:
            recovered[source] = now_ms
        for source in after:
            recovered.pop(source, None)
        if not ended:
            return []
        return [
            (p, stream_id)
            for p, streams in self._streams.items()
            for stream_id, (source, _, is_held) in streams.items()
            if is_held and source in ended
        ]

    @property
    def outages(self) -> list[Outage]:
        """The sources in outage at the last `refresh`, by name."""
        return sorted(self._outages.values(), key=lambda o: o.source)

    # -- publishing ----------------------------------------------------------------------

    def demands(self, now_ms: int) -> dict[str, dict[int, int]]:
        """Per source, each partition's published demand (in-flight plus waiting windows), from
        every fresh entry of the view, this coordinator's own included: every coordinator
        allocates a source's cap from the same numbers (streams.core.admission.share)."""
        out: dict[str, dict[int, int]] = {}
        for entry in self._view().values():
            if now_ms - entry.published_ms >= self.stale_ms:
                continue
            for source, counts in entry.sources.items():
                out.setdefault(source, {})[entry.partition] = counts.demand
        return out

    def entries(
        self,
        now_ms: int,
        load: Callable[[int, str], tuple[int, int, int]] | None = None,
        pacing: Callable[[], dict[str, int]] | None = None,
    ) -> list[tuple[bytes, bytes]]:
        """(key, value) of every built partition's entry when `publish_ms` has passed, else [].
        `load(partition, source)`: admission's (in flight, waiting, dispatched) there;
        `pacing()`: the sources whose recovery this coordinator paces, and each one's level."""
        last = self._published_ms
        if last is not None and 0 <= now_ms - last < self.publish_ms:
            return []
        self._published_ms = now_ms
        out = []
        outages = self._outages
        paced = {} if pacing is None else pacing()
        for p in sorted(self._built):
            sources = {}
            for source, (f, t) in self._counts.get(p, {}).items():
                in_flight, waiting, dispatched = (0, 0, 0) if load is None else load(p, source)
                sources[source] = SourceCountsModel(
                    failing=f,
                    total=t,
                    outage_since_ms=outages[source].since_ms if source in outages else None,
                    demand=in_flight + waiting,
                    in_flight=in_flight,
                    waiting=waiting,
                    dispatched=dispatched,
                )
            entry = HealthMessage(
                partition=p,
                owner=self.owner,
                published_ms=now_ms,
                sources=sources,
                pacing={s: level for s, level in paced.items() if s in sources},
            )
            out.append((health_key(p), encode_health(entry)))
        return out
