"""The streams table: every page, sort and search equals a plain sort of every row, however
the rows came in (one by one, in bulk, changed, removed), and the counts cover every row."""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.dashboard import table as table_module
from streams.dashboard.table import SORT_FIELDS, StreamTable
from streams.readview import STATES, ReadView

NOW = 1_800_000_000_000
RANK = {"retrying": 0, "catching up": 1, "paused": 2, "live": 3, "finished": 4}


def row(stream_id: str, downstream_ms: int | None = NOW - 5_000, **fields: Any) -> ReadView:
    """A live stream that falls behind 10 s after its downstream time, unless told otherwise
    (a `fixed_state` holds whatever the time)."""
    fixed_state = fields.pop("fixed_state", None)
    values: dict[str, Any] = {
        "stream_id": stream_id,
        "status": "live",
        "behind_after_ms": None if downstream_ms is None else downstream_ms + 10_000,
        "downstream_ms": downstream_ms,
        "last_commit_ms": None,
        "window": None,
        "attempt": 0,
        "last_error": None,
        "bypasses": 0,
    }
    values.update(fields)
    if fixed_state is not None:
        values["status"], values["behind_after_ms"] = fixed_state, None
    return ReadView(**values)


def reference(rows: list[ReadView], now_ms: int, sort: str, descending: bool, q: str) -> list[str]:
    """What the table must answer, by sorting every row the plain way."""
    rows = [r for r in rows if q in r.stream_id]
    if sort == "lag_ms":
        sort, descending = "downstream_ms", not descending
    if sort == "stream_id":
        ids = sorted(r.stream_id for r in rows)
        return ids[::-1] if descending else ids
    if sort == "state":

        def key(r: ReadView) -> tuple[Any, ...]:
            state = r.state(now_ms)
            group = (RANK.get(state, 5), state)
            if r.fixed_state is None:
                return (*group, 0, r.behind_after_ms, r.stream_id)
            return (*group, 1, 0, r.stream_id)

        ids = [r.stream_id for r in sorted(rows, key=key)]
        return ids[::-1] if descending else ids
    value = {
        "downstream_ms": lambda r: r.downstream_ms,
        "window": lambda r: None if r.window is None else r.window[0],
        "attempt": lambda r: r.attempt,
        "bypasses": lambda r: r.bypasses,
        "last_error": lambda r: (
            None if r.last_error is None else (r.last_error["kind"], r.last_error["message"])
        ),
    }[sort]
    keyed = sorted((value(r), r.stream_id) for r in rows if value(r) is not None)
    nulls = sorted(r.stream_id for r in rows if value(r) is None)
    ids = [i for _, i in keyed]
    return (ids[::-1] if descending else ids) + nulls


def ids(table: StreamTable, **query: Any) -> list[str]:
    return [r.stream_id for r in table.page(NOW, **query).rows]


def test_the_default_is_the_largest_lag_first() -> None:
    table = StreamTable([row("a", NOW - 5_000), row("far", NOW - 3_600_000), row("b", NOW - 5_000)])
    assert ids(table) == ["far", "a", "b"]
    assert ids(table, descending=False) == ["b", "a", "far"]  # exactly the reverse


def test_rows_without_a_value_come_last_either_way() -> None:
    table = StreamTable(
        [row("none"), row("w2", window=(20, 30)), row("w1", window=(10, 20)), row("also-none")]
    )
    assert ids(table, sort="window", descending=False) == ["w1", "w2", "also-none", "none"]
    assert ids(table, sort="window", descending=True) == ["w2", "w1", "also-none", "none"]


def test_live_and_catching_up_are_told_apart_at_the_requests_time() -> None:
    table = StreamTable(
        [
            row("soon", NOW - 9_000),  # behind at NOW + 1 s
            row("later", NOW - 1_000),  # behind at NOW + 9 s
            row("stuck", NOW - 600_000, fixed_state="retrying", behind_after_ms=None),
            row("held", NOW, fixed_state="paused", behind_after_ms=None),
        ]
    )
    counts = table.counts(NOW)
    assert counts == {"live": 2, "catching up": 0, "retrying": 1, "paused": 1, "finished": 0}
    assert table.counts(NOW + 5_000)["catching up"] == 1
    assert ids(table, sort="state", descending=False) == ["stuck", "held", "soon", "later"]
    page = table.page(NOW + 5_000, "state", descending=False)
    assert [r.stream_id for r in page.rows] == ["stuck", "soon", "held", "later"]
    assert [r.state(NOW + 5_000) for r in page.rows] == [
        "retrying",
        "catching up",
        "paused",
        "live",
    ]


def test_a_search_matches_substrings_and_counts_its_matches() -> None:
    table = StreamTable(row(f"cluster-{i:03d}", NOW - i * 1000) for i in range(300))
    page = table.page(NOW, q="-1", limit=5)
    assert page.matching == 100  # cluster-100 to cluster-199
    assert [r.stream_id for r in page.rows] == [f"cluster-{i}" for i in range(199, 194, -1)]
    assert ids(table, q="cluster-042") == ["cluster-042"]
    assert table.page(NOW, q="nothing").matching == 0
    assert ids(table, q="-1", sort="stream_id", offset=98, descending=False) == [
        "cluster-198",
        "cluster-199",
    ]


def test_changes_move_rows_and_a_search_sees_new_streams() -> None:
    table = StreamTable([row("a", NOW - 1_000), row("b", NOW - 2_000), row("c", NOW - 3_000)])
    assert table.page(NOW, q="d").matching == 0
    table.apply([row("a", NOW - 9_000), row("d", NOW)], removed=["b"])
    assert ids(table) == ["a", "c", "d"]
    assert table.page(NOW, q="d").matching == 1
    assert len(table) == 3
    table.apply([], removed=["nobody"])  # unknown ids are ignored
    assert len(table) == 3


def test_an_order_asked_for_later_is_kept_up_to_date() -> None:
    rows = [row(f"s{i:02d}", attempt=i % 3) for i in range(40)]
    table = StreamTable(rows)
    assert ids(table, sort="attempt", limit=3) == ["s38", "s35", "s32"]
    table.apply([row("s38", attempt=0), row("new", attempt=9)])
    assert ids(table, sort="attempt", limit=3) == ["new", "s35", "s32"]


names = st.text(alphabet="abc-", min_size=1, max_size=4)
rows_strategy = st.builds(
    row,
    names,
    st.one_of(st.none(), st.integers(NOW - 50_000, NOW)),
    fixed_state=st.sampled_from([None, None, "retrying", "paused", "finished"]),
    window=st.one_of(st.none(), st.tuples(st.integers(0, 5), st.just(9))),
    attempt=st.integers(0, 3),
    bypasses=st.integers(0, 2),
    last_error=st.one_of(
        st.none(), st.fixed_dictionaries({"kind": st.sampled_from("xy"), "message": names})
    ),
)


@settings(max_examples=150, deadline=None)
@given(
    first=st.lists(rows_strategy, max_size=30),
    batches=st.lists(
        st.tuples(st.lists(rows_strategy, max_size=12), st.lists(names, max_size=4)), max_size=4
    ),
    now_offset=st.integers(-20_000, 60_000),
    sort=st.sampled_from(SORT_FIELDS),
    descending=st.booleans(),
    q=st.sampled_from(["", "", "a", "b-", "c", "zz"]),
    offset=st.integers(0, 35),
    limit=st.integers(1, 40),
    rebuild_share=st.sampled_from([4, 10**9]),  # the default, or never rebuild: one by one
    walk=st.sampled_from([None, True, False]),  # a search's choice, or forced either way
)
def test_every_page_equals_a_plain_sort_of_every_row(
    first: list[ReadView],
    batches: list[tuple[list[ReadView], list[str]]],
    now_offset: int,
    sort: str,
    descending: bool,
    q: str,
    offset: int,
    limit: int,
    rebuild_share: int,
    walk: bool | None,
) -> None:
    choice = table_module._walk_is_cheaper if walk is None else (lambda *_: walk)
    with (
        mock.patch.object(table_module, "REBUILD_SHARE", rebuild_share),
        mock.patch.object(table_module, "APPLY_CHUNK", 2),  # a refresh in several holds
        mock.patch.object(table_module, "_walk_is_cheaper", choice),
    ):
        check_a_page(first, batches, now_offset, sort, descending, q, offset, limit)


def check_a_page(
    first: list[ReadView],
    batches: list[tuple[list[ReadView], list[str]]],
    now_offset: int,
    sort: str,
    descending: bool,
    q: str,
    offset: int,
    limit: int,
) -> None:
    table = StreamTable(first)
    table.page(NOW, sort)  # an order built early must follow every later change
    truth = {r.stream_id: r for r in first}
    for changed, removed in batches:
        table.apply(changed, removed)
        for r in changed:
            truth[r.stream_id] = r
        for stream_id in removed:
            truth.pop(stream_id, None)
    now = NOW + now_offset
    expected = reference(list(truth.values()), now, sort, descending, q)
    page = table.page(now, sort, descending, offset, limit, q)
    assert [r.stream_id for r in page.rows] == expected[offset : offset + limit]
    assert page.matching == len(expected)
    assert len(table) == len(truth)
    counts = dict.fromkeys(STATES, 0)
    for r in truth.values():
        counts[r.state(now)] += 1
    assert table.counts(now) == counts
