"""A coordinator's share of a source's cap: the allocation's properties, and the bound on what
is in flight while coordinators read views up to one publish apart and partitions move."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.admission import Shares, allocate, grant, spread

demand_maps = st.dictionaries(st.integers(0, 63), st.integers(0, 50), max_size=12)


def test_a_demand_within_the_limit_is_granted_whole() -> None:
    assert allocate(20, {0: 5, 1: 0, 2: 15}) == {0: 5, 1: 0, 2: 15}


def test_a_short_limit_is_split_by_demand_one_each_first() -> None:
    # 1 each, then 7 over the demands left (4, 19, 0): 1.22 and 5.78, the larger remainder
    # gets the last one.
    assert allocate(10, {0: 5, 1: 20, 2: 1, 3: 0}) == {0: 2, 1: 7, 2: 1, 3: 0}


def test_ties_go_by_partition_number() -> None:
    assert allocate(3, {4: 2, 1: 2, 3: 2, 2: 2}) == {4: 0, 1: 1, 3: 1, 2: 1}
    assert allocate(4, {5: 3, 2: 3, 9: 3}) == {5: 1, 2: 2, 9: 1}


def test_a_limit_below_the_partitions_wanting_goes_to_the_largest_demands() -> None:
    assert allocate(2, {0: 1, 1: 9, 2: 4, 3: 9}) == {0: 0, 1: 1, 2: 0, 3: 1}
    assert allocate(0, {0: 3}) == {0: 0}


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError):
        allocate(-1, {})
    with pytest.raises(ValueError):
        allocate(3, {0: -1})


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 60), demand_maps, st.randoms(use_true_random=False))
def test_allocation_is_within_the_limit_and_each_demand_and_deterministic(
    limit: int, demands: dict[int, int], rnd: random.Random
) -> None:
    shares = allocate(limit, demands)
    assert shares.keys() == demands.keys()
    assert sum(shares.values()) == min(limit, sum(demands.values()))
    assert all(0 <= shares[p] <= demands[p] for p in demands)
    wanting = [p for p in demands if demands[p] > 0]
    if len(wanting) <= limit:
        assert all(shares[p] >= 1 for p in wanting)
    items = list(demands.items())
    rnd.shuffle(items)
    assert allocate(limit, dict(items)) == shares  # the same view decides the same anywhere
    # More demand never gets less (largest remainder, among those that keep their 1 each).
    for p in wanting:
        for q in wanting:
            if demands[p] > demands[q] and len(wanting) <= limit:
                assert shares[p] >= shares[q]


def test_a_rise_waits_for_two_views_and_a_cut_is_at_once() -> None:
    shares = Shares(limit=10)
    shares.update({0: 10, 1: 0})
    assert shares.grant([0]) == 0  # a first view alone grants nothing
    shares.update({0: 10, 1: 0})
    assert shares.grant([0]) == 10
    shares.update({0: 10, 1: 10})
    assert (shares.grant([0]), shares.grant([1])) == (5, 0)
    shares.update({0: 10, 1: 10})
    assert (shares.grant([0]), shares.grant([1])) == (5, 5)
    assert grant([0, 1, 7], {0: 3, 1: 4}, {0: 5, 7: 2}) == 3


def test_the_unused_limit_is_spread_over_every_partition_of_the_view() -> None:
    assert spread(20, {0: 5, 1: 0, 2: 3}) == {0: 9, 1: 4, 2: 7}  # 12 left: 4 each
    assert spread(10, {3: 1, 1: 0}) == {3: 5, 1: 5}  # 9 left: 5 to the lower partition, 4
    assert spread(10, allocate(10, {0: 30, 1: 30})) == {0: 5, 1: 5}  # nothing left
    assert spread(10, {}) == {}
    shares = Shares(limit=20)  # one coordinator owning every partition holds the whole cap
    for _ in range(2):
        shares.update({0: 2, 1: 0, 2: 1})
    assert shares.grant([0, 1, 2]) == 20


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 40), demand_maps)
def test_a_spread_allocation_is_the_whole_limit_and_keeps_each_allocation(
    limit: int, demands: dict[int, int]
) -> None:
    allocation = allocate(limit, demands)
    spread_out = spread(limit, allocation)
    assert set(spread_out) == set(allocation)
    assert all(spread_out[p] >= allocation[p] for p in allocation)
    assert sum(spread_out.values()) == (limit if demands else 0)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 40),
    st.lists(st.lists(st.integers(0, 30), min_size=3, max_size=3), min_size=1, max_size=12),
    st.lists(st.integers(0, 3), min_size=12, max_size=12),
    st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_shares_from_views_one_publish_apart_never_add_up_over_the_limit(
    limit: int,
    demands: list[list[int]],
    owners: list[int],
    ahead: list[bool],
) -> None:
    """`demands[p]`: partition p's demand in three consecutive views; `owners[p]` owns it;
    coordinator c has read the newest view when `ahead[c]`, else it is one behind."""
    older, now, newer = (
        spread(limit, allocate(limit, {p: d[k] for p, d in enumerate(demands)})) for k in range(3)
    )
    owned: dict[int, set[int]] = {c: set() for c in range(4)}
    for partition in range(len(demands)):
        owned[owners[partition]].add(partition)
    total = sum(
        grant(owned[c], newer, now) if ahead[c] else grant(owned[c], now, older) for c in owned
    )
    assert total <= limit


class _Sim:
    """Coordinators sharing one source's cap through views of the `health` topic, one step a
    publish: publish, read (some coordinators a view behind), move partitions, answer, admit."""

    def __init__(self, limit: int, partitions: int, coordinators: int, rnd: random.Random):
        self.limit = limit
        self.rnd = rnd
        self.owner: dict[int, int | None] = {p: p % coordinators for p in range(partitions)}
        self.waiting = dict.fromkeys(range(partitions), 0)
        self.tasks: dict[int, list[int]] = {p: [] for p in range(partitions)}  # steps left
        self.views: list[dict[int, int]] = []
        self.read = dict.fromkeys(range(coordinators), -1)  # latest view index read
        self.shares: dict[int, tuple[dict[int, int], dict[int, int]]] = {
            c: ({}, {}) for c in range(coordinators)
        }

    def grant_of(self, c: int) -> int:
        now, before = self.shares[c]
        return grant([p for p, o in self.owner.items() if o == c], now, before)

    def in_flight_of(self, c: int) -> int:
        return sum(len(self.tasks[p]) for p, o in self.owner.items() if o == c)

    def excess(self) -> int:
        over = sum(max(0, self.in_flight_of(c) - self.grant_of(c)) for c in self.shares)
        return over + sum(len(self.tasks[p]) for p, o in self.owner.items() if o is None)

    def total(self) -> int:
        return sum(len(t) for t in self.tasks.values())

    def publish(self, new_demand: dict[int, int]) -> None:
        for p, d in new_demand.items():
            if p in self.waiting:
                self.waiting[p] += d
        self.views.append({p: len(self.tasks[p]) + self.waiting[p] for p in self.tasks})

    def read_views(self, behind: set[int]) -> None:
        latest = len(self.views) - 1
        for c in self.read:
            target = latest - 1 if c in behind else latest
            while self.read[c] < target:  # one view at a time, never backwards
                self.read[c] += 1
                view = spread(self.limit, allocate(self.limit, self.views[self.read[c]]))
                self.shares[c] = (view, self.shares[c][0])

    def move(self, partition: int, to: int | None) -> None:
        """Revoke (to None) or assign a rebuilt partition: its in-flight tasks go with it."""
        self.owner[partition] = to

    def answer(self) -> None:
        for p, left in self.tasks.items():
            self.tasks[p] = [s - 1 for s in left if s > 0]

    def admit(self, lifetimes: list[int]) -> None:
        for c in self.shares:
            room = self.grant_of(c) - self.in_flight_of(c)
            for p in sorted(p for p, o in self.owner.items() if o == c):
                while room > 0 and self.waiting[p] > 0:
                    self.waiting[p] -= 1
                    self.tasks[p].append(self.rnd.choice(lifetimes))
                    room -= 1


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 30),
    st.integers(1, 8),
    st.integers(1, 3),
    st.sampled_from([[0], [0, 1], [0, 1, 2, 3]]),
    st.randoms(use_true_random=False),
    st.integers(5, 25),
)
def test_in_flight_stays_within_the_limit_plus_what_the_views_cut(
    limit: int,
    partitions: int,
    coordinators: int,
    lifetimes: list[int],
    rnd: random.Random,
    steps: int,
) -> None:
    """At every point: shares <= limit, and in flight <= limit + E (E: tasks over their
    coordinator's share, or of a partition between owners). E grows only at a read, by at most
    the shares it cut, and at a revocation, by at most the partition's tasks; answers and
    admissions never grow it. Tasks answered within a publish keep in flight <= limit."""
    sim = _Sim(limit, partitions, coordinators, rnd)
    for _ in range(steps):
        sim.publish({p: rnd.choice([0, 0, 1, 3, 10]) for p in range(partitions)})
        before = {c: sim.grant_of(c) for c in sim.shares}
        excess = sim.excess()
        sim.read_views({c for c in sim.shares if rnd.random() < 0.3})
        moved = 0
        if rnd.random() < 0.3:  # a rebalance: revoke one partition, or assign one rebuilt
            p = rnd.randrange(partitions)
            if sim.owner[p] is not None:
                moved = len(sim.tasks[p])
            sim.move(p, None if sim.owner[p] is not None else rnd.randrange(coordinators))
        cut = sum(max(0, before[c] - sim.grant_of(c)) for c in sim.shares)
        assert sum(sim.grant_of(c) for c in sim.shares) <= limit
        assert sim.total() <= limit + sim.excess()
        assert sim.excess() <= excess + cut + moved
        excess = sim.excess()
        sim.answer()
        assert sim.excess() <= excess
        excess = sim.excess()
        sim.admit(lifetimes)
        assert sim.excess() <= excess
        assert sim.total() <= limit + sim.excess()
        if lifetimes == [0]:  # everything dispatched is answered before the next admissions
            assert sim.total() <= limit
