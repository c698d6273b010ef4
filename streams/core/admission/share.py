"""Each coordinator's share of a source's `max_in_flight`, with no coordinator to ask.

A source's streams are spread over partitions, and each partition is owned by one coordinator.
Every coordinator publishes, every `publish_ms` (1 s), each of its partitions' counts per source
to the compacted `health` topic (streams.coordinator.health), and reads every other
partition's entry back. With each partition's **demand** for the source in it (its in-flight
plus waiting windows), every coordinator computes the same allocation from the same view, so no
one needs to be asked:

1. `allocate(limit, demands)`: every partition with demand gets 1 while the limit allows (the
   largest demands first, ties by partition number), then the rest of the limit is split in
   proportion to the demands left (each partition's demand less that 1), by largest remainder
   (ties by partition number). So the sum is at most the limit, exactly the limit whenever the
   demand exceeds it, each partition gets at most its demand, and the result depends on the view
   alone (deterministic: every coordinator computes the same).
2. `grant(owned, now, before)`: a coordinator's share is the sum, over the partitions it owns,
   of the smaller of a partition's allocation in the latest view and in the one before. A share
   falls at once and rises only once two consecutive views agree.

**The bound.** Let L be the limit, A_k the allocation of the k-th published view, O_c the
partitions coordinator c owns (disjoint: a partition is revoked before it is assigned) and
G_c = sum over p in O_c of min(A_k(p), A_{k-1}(p)) for c's latest view k.

- *Shares*: if, at an instant, every coordinator's latest view is k or k+1 (views up to one
  publish apart), then sum_c G_c <= L. Proof: a coordinator at k+1 holds min(A_{k+1}(p), A_k(p))
  <= A_k(p); one at k holds min(A_k(p), A_{k-1}(p)) <= A_k(p); the O_c are disjoint, so the sum
  is at most sum_p A_k(p) <= L. Without the min, one coordinator at k+1 and one at k could hold
  A_{k+1}(p) + A_k(q) for capacity moving from q to p: up to 2 L.
- *In flight*: a coordinator's gate admits only while its in flight is below its share
  (streams.core.admission.gate), so in flight exceeds the shares only by tasks dispatched under
  a share that has since been cut: at every instant **in flight <= L + E**, where E counts the
  tasks over their coordinator's share, plus those of a partition between two owners. E never
  grows by an admission (a coordinator over its share dispatches nothing) and falls with every
  answer (or timeout). It grows only when a coordinator reads a view, by at most the shares that
  read cut: reading view j after j-1 cuts partition p by at most max(0, A_{j-1}(p) - A_j(p)),
  so a view cuts at most C_j = sum_p max(0, A_{j-1}(p) - A_j(p)) <= L over all coordinators;
  and when a partition is revoked, by at most its tasks in flight. The capacity a view cuts
  from one coordinator reaches another only at its next read (a rise needs two views), so (an
  argument, not a test) when every task is answered within one publish (the usual case) the
  overshoot is at most the cuts of the last two views and the tasks of a partition moving then:
  **in flight <= L + C_k + C_{k+1} + (in flight of the partitions moving)**: no overshoot when
  demand is steady, and at most 3 L when the whole limit moves between partitions twice in two
  publishes; it is back to L once those tasks are answered. Answers slower than a publish keep
  each further view's cut out while they are outstanding. (tests/core/admission/test_share.py
  checks each step on random views, reads a view behind, revocations and answer times, and
  that with every task answered before the next admissions in flight never exceeds L.)
- *Assumption*: "view k" means the same demands for every coordinator: the entries of one
  publish round (numbered, e.g., by publish time truncated to `publish_ms`), each coordinator
  calling `Shares.update` once per round. A coordinator's first view grants nothing until a
  second one agrees: a start waits one publish.
- *Rebalance*: a moving partition's in-flight windows are in its state, counted by its new owner
  once it has rebuilt the partition, under the same allocations (they depend on the view, not on
  the owner). While it moves it is in no O_c: the old owner's share has dropped its allocation
  and no one dispatches for it, so its unanswered tasks are part of E (E grows by at most its
  tasks in flight), and the bound above holds through the move. A new owner that adopts more
  tasks than the partition's share dispatches nothing more for it until they are answered.

The design space, as read: YouTube's Doorman apportions a resource's capacity among clients by
their *wants* (we use demand), never hands out more than the capacity, and lets a client wait
for capacity that others still hold, converging after one refresh cycle (our rise after two
views); it needs a master server and leases, which the `health` topic replaces here
(every coordinator computes the master's answer from the same view). Envoy's global rate
limiting pairs a coarse local token bucket with a global limit, and its quota-based variant
shares a global limit among instances from periodic load reports: our bucket is the local stage
(streams.core.admission.bucket) and the health reports are the load reports. No code of either
was used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def allocate(limit: int, demands: Mapping[int, int]) -> dict[int, int]:
    """Each partition's share of `limit`, by demand (see the module's docstring). Every
    partition of `demands` is in the result (0 for no demand)."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    wanting = []
    total = 0
    for partition, demand in demands.items():
        if demand < 0:
            raise ValueError(f"partition {partition}'s demand must be >= 0, got {demand}")
        if demand:
            wanting.append(partition)
            total += demand
    if total <= limit:
        return dict(demands)
    shares = dict.fromkeys(demands, 0)
    if len(wanting) >= limit:  # one each for the largest demands while the limit allows
        wanting.sort(key=lambda p: (-demands[p], p))
        for partition in wanting[:limit]:
            shares[partition] = 1
        return shares
    rest = limit - len(wanting)
    rest_demand = total - len(wanting)  # > rest, since total > limit
    remainders = []
    given = 0
    for partition in wanting:
        quota, remainder = divmod(rest * (demands[partition] - 1), rest_demand)
        shares[partition] = 1 + quota
        given += quota
        remainders.append((-remainder, partition))
    # The quotas' fractions add up to rest - given (< len(wanting)); the largest get one more.
    # A fraction above 0 means quota < demand - 1, so no one goes over its demand.
    remainders.sort()
    for _, partition in remainders[: rest - given]:
        shares[partition] += 1
    return shares


def spread(limit: int, allocation: Mapping[int, int]) -> dict[int, int]:
    """`allocation` with the part of `limit` it leaves unused spread over its partitions, evenly
    (the lowest partition numbers get one more when it does not divide): the sum is then the
    limit exactly (while there is a partition), and still the same for every coordinator.

    Why: demand is a publish old when a coordinator reads it. A partition given only what it
    wanted then could not dispatch a window that came due since until two views later (a rise
    waits for two), although the cap has room: a single coordinator with a cap of 20 and a
    demand of 5 a second ago would run at 5. The spare goes to every partition of the view, so
    a coordinator owning all of them holds the whole limit, and the bound above (which asks
    only that allocations add up to at most the limit) is unchanged."""
    out = dict(allocation)
    left = limit - sum(out.values())
    if left <= 0 or not out:
        return out
    partitions = sorted(out)
    each, extra = divmod(left, len(partitions))
    for i, partition in enumerate(partitions):
        out[partition] += each + (1 if i < extra else 0)
    return out


def grant(owned: Iterable[int], now: Mapping[int, int], before: Mapping[int, int]) -> int:
    """A coordinator's share: over the partitions it `owned`, the smaller of each one's
    allocation in the latest view (`now`) and the one before (`before`); 0 for a partition
    absent from either."""
    total = 0
    for partition in owned:
        a = now.get(partition, 0)
        b = before.get(partition, 0)
        total += a if a < b else b
    return total


class Shares:
    """The two latest allocations of one source, as a coordinator keeps them: `update` at each
    view read (once per publish), `grant(owned)` when its partitions or the view change. Each
    allocation has the limit's unused part spread over the view's partitions (`spread`)."""

    __slots__ = ("before", "limit", "now")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.now: dict[int, int] = {}
        self.before: dict[int, int] = {}

    def update(self, demands: Mapping[int, int]) -> None:
        """A new view: every partition's demand for the source."""
        self.before = self.now
        self.now = spread(self.limit, allocate(self.limit, demands))

    def grant(self, owned: Iterable[int]) -> int:
        return grant(owned, self.now, self.before)
