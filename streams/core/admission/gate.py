"""The admission gate: whether one of a source's windows may be dispatched now.

Every window is of a **class** (`classify`): LIVE, a stream's latest due window (its end
within one `window_ms` of now); CATCHUP, an older window of the live lane (a restart, a start_ms
in the past, a backlog after an outage); REPLAY, a window of the replay lane. A `SourceGate` per
source and coordinator counts this coordinator's windows of the source by class, in flight and
waiting, and decides each dispatch from those counts, the source's limits and `now_ms`:

    cap   = min(this coordinator's share of max_in_flight, the pacer's limit) (None: no cap)
    room  = cap - in flight (all classes)
    B     = CATCHUP + REPLAY in flight;  Lw, Cw, Rw = LIVE, CATCHUP, REPLAY waiting
    F     = the backfill floor: ceil(backfill_share * cap) while CATCHUP or REPLAY has demand
            (in flight or waiting), else 0; at most cap - 1 (LIVE keeps a slot), 0 at cap 1
    spare = max(0, min(F, B + Cw + Rw) - B): floor slots the backfill needs and does not use

| class   | admitted when (then it takes a token, if the source has a rate)              |
|---------|------------------------------------------------------------------------------|
| LIVE    | room > spare: it may take anything but the backfill's unused floor           |
| CATCHUP | room > 0, and B < F (inside the floor) or room > Lw (LIVE's waiting fit)     |
| REPLAY  | room > 0, and F - B > Cw (floor left after CATCHUP) or room > Lw + Cw        |
| tokens  | LIVE takes any token (but the last one while the backfill waits with a      |
|         | credit), and so does a window admitted inside the floor; beyond it, CATCHUP  |
|         | only if Lw tokens stay after it, REPLAY if Lw + Cw do, or if the backfill    |
|         | has a credit: each LIVE token taken while the backfill has demand gives it   |
|         | backfill_share / (1 - backfill_share) (at most `burst`), so that it keeps    |
|         | its share of the rate even without a cap                                     |

So when room is short LIVE goes before CATCHUP before REPLAY, yet the backfill keeps F slots
(and its share of tokens) while it has demand, and a backfill window beyond its floor is
admitted only when every waiting LIVE window would still fit. Nothing is preempted: a LIVE window
may wait for backfill tasks admitted while no LIVE window waited, until they are answered.

**Within a class** the gate keeps no per-stream state: the coordinator's queue orders the
streams, first come, first served (streams.coordinator.admission.queue: round robin over the
waiting streams; the most behind first was measured against it, and starved a live stream that
slipped into CATCHUP behind a day of backfill), and keeps each decision here O(1).

**Waiting is not failing.** The gate decides before a dispatch, so a window it denies is not
dispatched: no attempt is counted and no `task_timeout_ms` deadline runs (it starts at the
dispatch). The rules the dispatch hook in streams.core.lifecycle must keep with it (that hook is
another change; these are its contract): a retry's due time is a lower bound that admission may
delay, never advance (the gate never makes a window due); the time a window waits for admission
is not spent from `bypass_after_ms` (that budget measures the source's failures, not Tidemark's
own pacing), so waiting alone never causes a bypass; and a waiting window is not failing, so it
neither counts towards an outage (streams.core.outage) nor starts or extends a hold
(`outage_max_hold_ms` runs from the failure that started the hold, as before).

**Shares.** A source with `max_in_flight` uses the whole cap until the coordinator calls
`set_share` with its share (streams.core.admission.share): right with one coordinator, and what
the coordinator must replace as soon as it reads the `health` view when there are several.

`wake_ms(now_ms)` says when a denied window could next be admitted: the next token's arrival,
or None when only an answer frees room. A gate whose limits are unlimited admits everything
while no recovery is paced, at the cost of one attribute test and one count.

Pure: counts and time in, a decision out.
"""

from __future__ import annotations

import math
from enum import IntEnum

from streams.core.admission.bucket import TokenBucket
from streams.core.admission.limits import SourceLimits
from streams.core.admission.pacing import Pacer
from streams.core.lanes import Lane


class Class(IntEnum):
    """A window's admission class, in priority order."""

    LIVE = 0
    CATCHUP = 1
    REPLAY = 2


LIVE, CATCHUP, REPLAY = Class.LIVE, Class.CATCHUP, Class.REPLAY
# How `_room` admitted a window: inside the backfill's floor, or by priority.
_FLOOR = 1
_ROOM = 2


def classify(window_end_ms: int, now_ms: int, window_ms: int, lane: Lane) -> Class:
    """A window's class: REPLAY on the replay lane; LIVE when its end is within one `window_ms`
    of `now_ms` (the stream's latest due window: a stream's windows are due in order, at their
    end, and those it generated ahead are not due yet); else CATCHUP. A stream with a
    `delay_ms` passes `now_ms - delay_ms`."""
    if lane == "replay":
        return REPLAY
    if now_ms - window_end_ms <= window_ms:
        return LIVE
    return CATCHUP


def backfill_floor(backfill_share: float, cap: int) -> int:
    """The slots CATCHUP and REPLAY keep under `cap` while they have demand (see the table)."""
    if cap <= 1 or backfill_share <= 0:
        return 0
    return min(math.ceil(backfill_share * cap), cap - 1)


class SourceGate:
    """One source's admission on this coordinator (see the module's table).

    `in_flight` and `waiting` are counts by class (index a list with a `Class`). The coordinator
    calls `waiting(klass, +1)` when a window of the source becomes due and `-1` when it leaves
    the queue (admitted or dropped), `admit` before each dispatch, and `answered` at each
    result or timeout of a dispatch it admitted.
    """

    __slots__ = (
        "_credit",
        "_credit_per_live",
        "_free",
        "_share",
        "bucket",
        "in_flight",
        "limits",
        "pacer",
        "waiting_counts",
    )

    def __init__(self, limits: SourceLimits, now_ms: int) -> None:
        self.limits = limits
        self.in_flight = [0, 0, 0]
        self.waiting_counts = [0, 0, 0]
        # Until the coordinator sets a share (streams.core.admission.share), the whole cap.
        self._share = limits.max_in_flight
        rate, burst = limits.rate_per_s, limits.burst
        self.bucket = None if rate is None or burst is None else TokenBucket(rate, burst, now_ms)
        share = limits.backfill_share
        self._credit_per_live = share / (1.0 - share)
        self._credit = 0.0
        self.pacer = Pacer(self._share, limits.pace_start)
        self._free = limits.is_unlimited

    # --- what the coordinator reads -------------------------------------------------------

    def cap(self) -> int | None:
        """The concurrency allowed now: the share of max_in_flight and the pacer's limit."""
        share = self._share
        paced = self.pacer.limit()
        if paced is None:
            return share
        return paced if share is None or paced < share else share

    @property
    def share(self) -> int | None:
        """This coordinator's share of max_in_flight (None: the source has no cap)."""
        return self._share

    @property
    def backfill_credit(self) -> float:
        """The tokens the backfill has earned beyond its place in line (see the table)."""
        return self._credit

    def demand(self) -> int:
        """In flight plus waiting, every class."""
        return sum(self.in_flight) + sum(self.waiting_counts)

    # --- what the coordinator tells it ----------------------------------------------------

    def set_share(self, share: int) -> None:
        """This coordinator's share of max_in_flight (streams.core.admission.share.grant);
        ignored for a source without max_in_flight."""
        if self.limits.max_in_flight is None:
            return
        self._share = share
        self.pacer.cap = share
        self.pacer.settle(self.demand())
        self._free = False

    def start_recovery(self, now_ms: int, backlog: int = 0) -> None:
        """The source left outage, or this coordinator restarted with a backlog (`backlog`: the
        windows it releases, streams.core.admission.pacing): pace."""
        self.pacer.cap = self._share
        self.pacer.start(now_ms, backlog)
        self._free = self.limits.is_unlimited and not self.pacer.active

    def waiting(self, klass: Class, delta: int) -> None:
        """A window of `klass` starts (+1) or stops (-1) waiting for admission."""
        count = self.waiting_counts[klass] + delta
        self.waiting_counts[klass] = count if count > 0 else 0

    def answered(self, klass: Class, ok: bool) -> None:
        """A dispatch of `klass` that this gate admitted was answered (`ok`: not a failure; a
        timeout is one). A count already at 0 stays there (a result the gate did not count)."""
        flying = self.in_flight
        before = flying[0] + flying[1] + flying[2]
        if flying[klass] > 0:
            flying[klass] -= 1
        pacer = self.pacer
        if pacer.active:
            if ok:
                # Only answers within the paced level grow it: tasks sent before the recovery
                # began (the retries whose acks ended the outage) are not its successes, and
                # 150 of them took the level from 4 to 154 in one round.
                if before <= pacer.level:
                    pacer.success(self.demand())
                else:
                    pacer.settle(self.demand())
            else:
                pacer.failure()
            if not pacer.active:
                self._free = self.limits.is_unlimited

    def admit(self, klass: Class, now_ms: int) -> bool:
        """Whether a window of `klass` may be dispatched at `now_ms`; if so it is counted in
        flight (and takes a token)."""
        if self._free:
            self.in_flight[klass] += 1
            return True
        how = self._room(klass)
        if not how or not self._token(klass, how, now_ms):
            return False
        self.in_flight[klass] += 1
        return True

    def admissible(self, wanted: tuple[int, int, int], now_ms: int) -> tuple[int, int, int]:
        """How many windows of each class `admit` would let through now, asked for `wanted`
        of each in class order (LIVE first): what the coordinator wakes, so that the streams
        it wakes are all admitted whatever order they are decided in. Changes nothing."""
        if self._free:
            return wanted
        flying, waiting = self.in_flight[:], self.waiting_counts[:]
        credit = self._credit
        bucket = self.bucket
        saved = None if bucket is None else (bucket.tokens, bucket.updated_ms)
        out = [0, 0, 0]
        for klass in (LIVE, CATCHUP, REPLAY):
            while out[klass] < wanted[klass] and self.admit(klass, now_ms):
                out[klass] += 1
                self.waiting(klass, -1)  # it leaves the queue as it goes
        self.in_flight[:] = flying
        self.waiting_counts[:] = waiting
        self._credit = credit
        if bucket is not None and saved is not None:
            bucket.tokens, bucket.updated_ms = saved
        return (out[0], out[1], out[2])

    def wake_ms(self, now_ms: int) -> int | None:
        """When a denied window could next be admitted: the next token's arrival (`now_ms` if
        one is there), None when only an answer frees room (or nothing limits the rate)."""
        cap = self.cap()
        if cap is not None and sum(self.in_flight) >= cap:
            return None
        bucket = self.bucket
        return None if bucket is None else bucket.next_token_ms(now_ms)

    # --- the rules ------------------------------------------------------------------------

    def _room(self, klass: Class) -> int:
        """0: no room for `klass`; _FLOOR: room inside the backfill's floor; _ROOM: room."""
        cap = self.cap()
        if cap is None:
            return _ROOM
        flying = self.in_flight
        room = cap - flying[0] - flying[1] - flying[2]
        if room <= 0:
            return 0
        waiting = self.waiting_counts
        backfill = flying[1] + flying[2]
        floor = backfill_floor(self.limits.backfill_share, cap)
        if klass == LIVE:
            needed = backfill + waiting[1] + waiting[2]
            spare = (floor if floor < needed else needed) - backfill
            return _ROOM if room > spare else 0
        if klass == CATCHUP:
            if backfill < floor:
                return _FLOOR
            return _ROOM if room > waiting[0] else 0
        if floor - backfill > waiting[1]:
            return _FLOOR
        return _ROOM if room > waiting[0] + waiting[1] else 0

    def _token(self, klass: Class, how: int, now_ms: int) -> bool:
        bucket = self.bucket
        if bucket is None:
            return True
        waiting = self.waiting_counts
        if klass == LIVE:
            # The backfill has earned a token and waits for it: LIVE leaves it one.
            if (
                self._credit >= 1.0
                and (waiting[1] or waiting[2])
                and (not bucket.available(now_ms) or bucket.tokens < 2.0)
            ):
                return False
            if not bucket.take(now_ms):
                return False
            if waiting[1] or waiting[2] or self.in_flight[1] or self.in_flight[2]:
                credit = self._credit + self._credit_per_live
                self._credit = credit if credit < bucket.burst else float(bucket.burst)
            return True
        if how == _FLOOR:  # the floor holds for tokens too: no token is kept for LIVE here
            return bucket.take(now_ms)
        if self._credit >= 1.0:  # the backfill's share of the rate, whatever waits above it
            if not bucket.take(now_ms):
                return False
            self._credit -= 1.0
            return True
        above = waiting[0] if klass == CATCHUP else waiting[0] + waiting[1]
        if above and (not bucket.available(now_ms) or bucket.tokens < 1.0 + above):
            return False  # the tokens there are kept for the classes above
        return bucket.take(now_ms)
