"""Admission's gauges per source, from this coordinator's gates (streams.coordinator.admission).

Every source this coordinator has dispatched for since it started has a gate, so a source shows
here once one of its windows was due on this coordinator. The cap and share read -1 for a
source without `max_in_flight`, and the pacing level -1 while no recovery is paced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from streams.core.admission import CATCHUP, LIVE, REPLAY, SourceGate

_CLASSES = ((LIVE, "live"), (CATCHUP, "catchup"), (REPLAY, "replay"))


class AdmissionCollector:
    """`gates`: the Admission's gates by source, read at each scrape; `dispatched`: its count of
    dispatches admitted per source."""

    def __init__(
        self,
        gates: Callable[[], Mapping[str, SourceGate]],
        dispatched: Callable[[], Mapping[str, int]],
    ) -> None:
        self._gates = gates
        self._dispatched = dispatched

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        gates = dict(self._gates())
        in_flight = GaugeMetricFamily(
            "tidemark_source_in_flight",
            "Tasks of a source this coordinator dispatched and has not seen answered, by class.",
            labels=["source", "class"],
        )
        waiting = GaugeMetricFamily(
            "tidemark_source_waiting",
            "Windows of a source waiting for admission on this coordinator, by class (live "
            "includes live streams standing by for their next window).",
            labels=["source", "class"],
        )
        limit = GaugeMetricFamily(
            "tidemark_source_max_in_flight",
            "A source's max_in_flight, across every coordinator (-1: none).",
            labels=["source"],
        )
        share = GaugeMetricFamily(
            "tidemark_source_share",
            "This coordinator's share of a source's max_in_flight (-1: no cap).",
            labels=["source"],
        )
        pacing = GaugeMetricFamily(
            "tidemark_source_pacing_level",
            "The concurrency a paced recovery allows now (-1: not pacing).",
            labels=["source"],
        )
        dispatched = CounterMetricFamily(
            "tidemark_source_dispatched",
            "Dispatches of a source admitted by this coordinator.",
            labels=["source"],
        )
        counts = dict(self._dispatched())
        for source, gate in sorted(gates.items()):
            for klass, name in _CLASSES:
                in_flight.add_metric([source, name], gate.in_flight[klass])
                waiting.add_metric([source, name], gate.waiting_counts[klass])
            cap = gate.limits.max_in_flight
            limit.add_metric([source], -1 if cap is None else cap)
            own = gate.share
            share.add_metric([source], -1 if own is None else own)
            level = gate.pacer.limit()
            pacing.add_metric([source], -1 if level is None else level)
            dispatched.add_metric([source], counts.get(source, 0))
        return [in_flight, waiting, limit, share, pacing, dispatched]
