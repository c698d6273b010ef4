"""The Sources view as pure functions of `health` and `sources` entries and the time: the sums
over fresh entries, pacing per owner, the dispatch rate through counter restarts and moves, and
the history's bounds (streams.dashboard.sources, streams.dashboard.source_history)."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from streams.core import OutagePolicy
from streams.core.admission import SourceLimits
from streams.dashboard.source_history import SourceHistory
from streams.dashboard.sources import SourcesView, sources_response
from streams.wire import HealthMessage, SourceCountsModel, SourceEntry

NOW = 1_800_000_000_000
STALE_MS = 30_000


def counts(
    failing: int = 0,
    total: int = 10,
    *,
    in_flight: int = 0,
    waiting: int = 0,
    dispatched: int = 0,
    since_ms: int | None = None,
) -> SourceCountsModel:
    return SourceCountsModel(failing=failing, total=total, outage_since_ms=since_ms,
                             demand=in_flight + waiting, in_flight=in_flight, waiting=waiting,
                             dispatched=dispatched)  # fmt: skip


def entry(
    partition: int,
    published_ms: int,
    owner: str = "c1",
    pacing: dict[str, int] | None = None,
    **sources: SourceCountsModel,
) -> HealthMessage:
    return HealthMessage(partition=partition, owner=owner, published_ms=published_ms,
                         sources=sources, pacing=pacing or {})  # fmt: skip


def view(**kwargs: int) -> SourcesView:
    return SourcesView(OutagePolicy(), STALE_MS, SourceHistory(**kwargs))


def rows(doc: dict[str, object]) -> dict[str, dict[str, object]]:
    listed = doc["sources"]
    assert isinstance(listed, list)
    return {row["source"]: row for row in listed}


def test_fresh_entries_are_summed_per_source_and_stale_ones_left_out() -> None:
    health = [
        entry(0, NOW - 1_000, S=counts(6, 8, in_flight=3, waiting=5, since_ms=NOW - 60_000),
              R=counts(0, 4, in_flight=1)),
        entry(1, NOW - 2_000, owner="c2", S=counts(2, 2, in_flight=4, waiting=1,
                                                   since_ms=NOW - 90_000)),
        entry(2, NOW - STALE_MS, owner="dead", S=counts(0, 500, in_flight=99, waiting=99),
              Old=counts(0, 1)),
    ]  # fmt: skip
    limits = [SourceEntry(SourceLimits("S", max_in_flight=20, rate_per_s=5.0), NOW - 5_000)]
    doc = view().observe(health, limits, NOW)
    s, r = rows(doc)["S"], rows(doc)["R"]
    assert {k: v for k, v in s.items() if k != "history"} == {
        "source": "S",
        "limits": {"max_in_flight": 20, "rate_per_s": 5.0, "burst": 5, "backfill_share": 0.2,
                   "pace_start": 4, "updated_ms": NOW - 5_000},
        "failing": 8,
        "total": 10,
        "in_outage": True,
        "outage_since_ms": NOW - 90_000,
        "in_flight": 7,
        "waiting": 6,
        "pacing": None,
        "partitions": 2,
    }  # fmt: skip
    assert (r["limits"], r["in_outage"], r["in_flight"], r["outage_since_ms"]) == (
        None,
        False,
        1,
        None,
    )
    # A source only a stale entry names is not listed: its owner is gone.
    assert sorted(rows(doc)) == ["R", "S"]
    assert doc["omitted"] == 0 and doc["stale_ms"] == STALE_MS


def test_a_source_with_limits_and_no_streams_is_listed_with_empty_health() -> None:
    doc = view().observe([], [SourceEntry(SourceLimits("idle", max_in_flight=3), NOW)], NOW)
    idle = rows(doc)["idle"]
    assert (idle["total"], idle["in_flight"], idle["partitions"]) == (0, 0, 0)
    assert idle["limits"] is not None and idle["limits"]["max_in_flight"] == 3  # type: ignore[index]


def test_pacing_counts_each_owners_level_once_from_its_newest_entry() -> None:
    health = [
        # c1 paces S at 8, published on both its partitions; its newer entry says 16.
        entry(0, NOW - 3_000, owner="c1", pacing={"S": 8}, S=counts()),
        entry(1, NOW - 1_000, owner="c1", pacing={"S": 16}, S=counts()),
        # c2 paces S at 4; c3 carries S and does not pace it.
        entry(2, NOW - 1_000, owner="c2", pacing={"S": 4}, S=counts()),
        entry(3, NOW - 1_000, owner="c3", S=counts(), R=counts()),
        entry(4, NOW - STALE_MS - 1, owner="c4", pacing={"R": 50}, R=counts()),  # stale
    ]
    found = rows(view().observe(health, [], NOW))
    assert found["S"]["pacing"] == 20
    assert found["R"]["pacing"] is None


def history_of(doc: dict[str, object], source: str) -> list[tuple[int, float | None, int]]:
    h = rows(doc)[source]["history"]
    assert isinstance(h, dict)
    return list(zip(h["at_ms"], h["dispatches_per_s"], h["failing"], strict=True))


def test_dispatches_per_second_from_the_counters_through_restarts_and_moves() -> None:
    v = view()

    def at(t: int, *parts: tuple[str, int, int]) -> dict[str, object]:
        """At NOW + t s, each (owner, dispatched, failing) of partitions 0, 1, ..."""
        when = NOW + t * 1000
        health = [entry(p, when, owner=o, S=counts(f, 10, dispatched=d))
                  for p, (o, d, f) in enumerate(parts)]  # fmt: skip
        return v.observe(health, [], when)

    at(0, ("c1", 1_000, 0), ("c2", 500, 1))  # the baseline: no rate yet
    at(5, ("c1", 1_050, 0), ("c2", 550, 1))  # counted, not sampled (10 s apart)
    at(10, ("c1", 1_100, 0), ("c2", 600, 2))  # +100 +100 over 10 s
    at(20, ("c1", 30, 0), ("c2", 650, 2))  # c1 restarted: 30 new, not -1070
    at(30, ("c2", 10, 0), ("c2", 700, 0))  # partition 0 moved to c2: its 10 are new
    at(35, ("c2", 10, 0))  # partition 1 left the topic: forgotten
    doc = at(40, ("c2", 40, 0), ("c1", 5, 0))  # back, counted from 0
    assert history_of(doc, "S") == [
        (NOW, None, 1),
        (NOW + 10_000, 20.0, 2),
        (NOW + 20_000, 8.0, 2),
        (NOW + 30_000, 6.0, 0),
        (NOW + 40_000, 3.5, 0),
    ]
    assert doc["sampled_ms"] == NOW + 40_000


def test_a_rate_is_over_the_time_since_the_last_sample_and_never_negative() -> None:
    v = view()
    for t, dispatched in [(0, 100), (13, 90), (26, 116), (39, 117)]:
        when = NOW + t * 1000
        doc = v.observe([entry(0, when, S=counts(dispatched=dispatched))], [], when)
    rates = [rate for _, rate, _ in history_of(doc, "S")]
    assert rates == [None, round(90 / 13, 3), 2.0, round(1 / 13, 3)]
    assert all(rate is None or rate >= 0 for rate in rates)


def test_the_history_keeps_an_hour_at_most_and_360_samples() -> None:
    v = view()
    for i in range(400):
        when = NOW + i * 10_000
        doc = v.observe([entry(0, when, S=counts(dispatched=i))], [], when)
    samples = history_of(doc, "S")
    assert len(samples) == 360
    assert samples[0][0] > NOW + 399 * 10_000 - 3_600_000
    assert samples[-1] == (NOW + 399 * 10_000, 0.1, 0)

    sparse = view(sample_ms=1_000, window_ms=5_000)  # samples 2 s apart: the window bounds
    for i in range(10):
        sparse.observe([entry(0, NOW + i * 2_000, S=counts())], [], NOW + i * 2_000)
    assert [s.at_ms - NOW for s in sparse.history.samples("S")] == [14_000, 16_000, 18_000]


def test_a_source_gone_keeps_its_history_for_the_hour_then_goes() -> None:
    v = view()
    v.observe([entry(0, NOW, Gone=counts(3, 3))], [], NOW)
    doc = v.observe([], [], NOW + 10_000)
    assert history_of(doc, "Gone") == [(NOW, None, 3)]  # shown, not sampled any more
    assert rows(doc)["Gone"]["total"] == 0
    doc = v.observe([], [], NOW + 3_600_000)
    assert rows(doc) == {}


def test_the_sources_listed_are_bounded_and_the_rest_counted() -> None:
    v = SourcesView(OutagePolicy(), STALE_MS, max_sources=3)
    health = [entry(0, NOW, **{f"s{i:02d}": counts() for i in range(10)})]
    doc = v.observe(health, [SourceEntry(SourceLimits("a-limited"), NOW)], NOW)
    assert list(rows(doc)) == ["a-limited", "s00", "s01"]
    assert doc["omitted"] == 8
    assert v.history.sources() == ["a-limited", "s00", "s01"]


def test_the_api_answers_the_document_with_or_without_histories() -> None:
    doc = view().observe([entry(0, NOW, S=counts(1, 2))], [], NOW)
    status, body = sources_response(doc, "", NOW + 500)
    assert status == HTTPStatus.OK
    assert body["now_ms"] == NOW + 500 and body["read_ms"] == NOW
    assert body["sources"][0]["history"]["failing"] == [1]
    _, light = sources_response(doc, "history=0", NOW)
    assert "history" not in light["sources"][0] and light["sources"][0]["total"] == 2
    assert doc["sources"][0]["history"]["failing"] == [1]  # the stored document is untouched
    _, unread = sources_response(None, "", NOW)
    assert unread["sources"] == [] and unread["read_ms"] is None


@pytest.mark.parametrize(
    ("query", "parameter"),
    [("history=2", "history"), ("history=0&history=1", "history"), ("q=x", "q"),
     ("history", "query")],
)  # fmt: skip
def test_a_bad_parameter_is_a_400_naming_it(query: str, parameter: str) -> None:
    status, body = sources_response(None, query, NOW)
    assert status == HTTPStatus.BAD_REQUEST
    assert body["parameter"] == parameter and body["error"].startswith(f"bad parameter {parameter}")


def test_a_clock_that_goes_back_takes_no_sample_and_the_next_rate_counts_from_there() -> None:
    v = view()
    v.observe([entry(0, NOW, S=counts(dispatched=0))], [], NOW)
    taken = v.history.observe([entry(0, NOW, S=counts(dispatched=50))], {}, NOW - 60_000,
                              {"S"}, {"S"})  # fmt: skip
    assert taken is False and v.history.sampled_ms == NOW - 60_000
    doc = v.observe([entry(0, NOW, S=counts(dispatched=100))], [], NOW - 50_000)
    assert history_of(doc, "S")[-1] == (NOW - 50_000, 10.0, 0)  # 100 over the 10 s since
