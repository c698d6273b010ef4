"""The replay lane's properties over the in-process Processor (issue 25, "What to build" 2).

Random interleavings of live acks (whole and partial), non-retryable and shutdown nacks, replay
requests, replay acks (whole, partial, at the start, at 0, past the end; of the stream's
incarnation, of another, or without one), replay nacks, late results of any earlier task,
timeouts (the clock moves on), takeovers (a restart, the new owner within its grace until it
has caught up) and aborts: transactional, a restart undoes everything since the last
checkpoint (its transaction never committed: the stores go back and its outputs are never
read); at least once, delivery callbacks are lost at a restart and some deliveries fail.

What a consumer reads of `commits` and `tasks` must hold, whatever the interleaving:
- one chain per stream (one incarnation here): each commit starts at the last one's
  `downstream_ms` (at least once: at or below it, a repeat), `downstream_ms` never goes back,
  and a `replayed` window comes after its `bypass` and moves nothing (`check_chain`);
- every `replayed` window was acked whole by a replay task of the current incarnation, sent
  before the commit appeared;
- a replay task's id never equals a live task's id, and it carries the stream's incarnation.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.support.commits import check_chain

from .fakes import T0, Driver, Sent, ack, at, heartbeat, nack

SID = "cluster-a"
STEP_MS = 15_000
# Each action with its weight: enough ticks, bypasses and flushes that most runs replay.
ACTIONS = (
    ("tick", 4),
    ("live_ack", 3),
    ("live_nack", 3),
    ("replay", 3),
    ("replay_ack", 5),
    ("replay_nack", 1),
    ("flush", 4),  # transactional: a checkpoint; at least once: deliveries confirmed or failed
    ("restart", 1),
    ("caught_up", 1),
)
Action = tuple[str, int]


def _choose(tasks: list[dict[str, Any]], pick: int) -> dict[str, Any]:
    """Mostly one of the last two tasks sent (the ones a worker is on); one time in four any
    earlier one (a late result, read again)."""
    if pick % 4 == 3:
        return tasks[(pick // 4) % len(tasks)]
    return tasks[-1 - pick % min(2, len(tasks))]


class Run:
    """One interleaving: the driver, what a consumer has read, and the checks as it goes."""

    def __init__(self, transactional: bool) -> None:
        self.transactional = transactional
        self.now_ms = at(10, 0, 30)
        self.d = Driver(
            transactional=transactional,
            checkpoint_each=False,
            flush_ms=1_000,
            catch_up_max_ms=30_000,
        )
        self.d.assign(SID)
        self.d.caught_up(SID)
        self.d.upsert(
            SID, self.now_ms, non_retryable=["bad_params"], max_in_flight=2, task_timeout_ms=240_000
        )
        # What a consumer has read of processes gone (a restart), and, at least once, the ids
        # of sends confirmed delivered (those without a callback are read at once; a send
        # still pending at a crash, or failed, is never read).
        self.history: list[Sent] = []
        self.gone: list[list[Sent]] = []  # their sends, kept so that no id is reused
        self.delivered: set[int] = set()
        self.committed = 0  # transactional: sends up to here are committed (read_committed)
        self.snapshot: tuple[dict[str, bytes], dict[str, bytes]] = ({}, {})
        self.checked = 0  # commits read and checked so far
        # (start_ms, end_ms, attempt) of whole acks of replay tasks of the current incarnation
        self.whole_replay_acks: set[tuple[int, int, int]] = set()
        self.incarnation: int | None = None
        self._checkpoint()

    # -- what a consumer reads --------------------------------------------------------------

    def _read(self) -> list[Sent]:
        return self.history + self._visible()

    def _visible(self) -> list[Sent]:
        """What a consumer reads of the current process's sends."""
        sent = self.d.emitter.sent
        if self.transactional:
            return sent[: self.committed]
        delivered = self.delivered
        return [
            s
            for s in sent
            if (s.on_delivered is None and s.on_failed is None) or id(s) in delivered
        ]

    def tasks(self, replay: bool) -> list[dict[str, Any]]:
        topic = self.d.topics.tasks
        tasks = (s.json() for s in self._read() if s.topic == topic)
        return [t for t in tasks if bool(t.get("replay")) is replay]

    def commits(self) -> list[dict[str, Any]]:
        return [s.json() for s in self._read() if s.topic == self.d.topics.commits]

    def check(self) -> None:
        commits = self.commits()
        check_chain(commits, exact=self.transactional)
        for commit in commits[self.checked :]:
            for w in commit["windows"]:
                if w["reason"] != "replayed":
                    continue
                acked = [
                    a
                    for (s, e, a) in self.whole_replay_acks
                    if (s, e) == (w["start_ms"], w["end_ms"]) and a <= w["attempts"]
                ]
                assert acked, f"replayed without a whole ack of a replay task: {commit}"
        self.checked = len(commits)
        live = self.tasks(replay=False)
        replays = self.tasks(replay=True)
        if live and self.incarnation is None:
            self.incarnation = live[0]["incarnation"]
        live_ids = {t["task_id"] for t in live}
        for task in replays:
            assert task["task_id"] not in live_ids, f"a replay task id is a live one's: {task}"
            assert task.get("incarnation") == self.incarnation, f"not the stream's: {task}"

    # -- the actions ------------------------------------------------------------------------

    def step(self, kind: str, pick: int) -> None:
        d = self.d
        if kind == "tick":
            self.now_ms += STEP_MS * (1 + pick % 8)  # 15 s to 2 min: windows end, tasks time out
            d.tick(self.now_ms)
            if pick % 2:
                self._checkpoint()  # the engine commits on its own interval too
            return
        self.now_ms += 1 + pick % 1_000
        if kind == "live_ack" or kind == "live_nack":
            live = self.tasks(replay=False)
            if live:
                task = _choose(live, pick)
                if kind == "live_ack":
                    steps = (task["end_ms"] - task["start_ms"]) // STEP_MS
                    ack_ms = task["start_ms"] + STEP_MS * (1 + pick % steps)  # whole or partial
                    d.result(ack(task, ack_ms), self.now_ms)
                else:
                    kind_ = ("bad_params", "bad_params", "export", "shutdown")[pick % 4]
                    d.result(nack(task, kind_), self.now_ms)
        elif kind == "replay":
            replay = {"type": "replay", "stream_id": SID, "from_ms": T0, "to_ms": self.now_ms}
            d.control(replay, self.now_ms)
        elif kind == "replay_ack" or kind == "replay_nack":
            replays = self.tasks(replay=True)
            if replays:
                self._replay_result(_choose(replays, pick), kind, pick)
        elif kind == "flush":
            self._flush(pick)
        elif kind == "restart":
            self._restart()
        elif kind == "caught_up":
            d.caught_up(SID)

    def _replay_result(self, task: dict[str, Any], kind: str, pick: int) -> None:
        current = self.tasks(replay=False)[0]["incarnation"]  # the stream's (a replay needs one)
        incarnation = (current, current + 1, None)[pick % 3]
        extra = {} if incarnation is None else {"incarnation": incarnation}
        if kind == "replay_nack":
            value = (
                heartbeat(task, **extra)
                if pick % 5 == 0
                else nack(task, ("export", "shutdown")[pick % 2], **extra)
            )
            self.d.result(value, self.now_ms)
            return
        start_ms, end_ms = task["start_ms"], task["end_ms"]
        ack_ms = (end_ms, end_ms, start_ms, 0, start_ms + STEP_MS, end_ms + 1)[(pick // 3) % 6]
        if ack_ms == end_ms and incarnation != current + 1:
            self.whole_replay_acks.add((start_ms, end_ms, task["attempt"]))
        self.d.result(ack(task, ack_ms, **extra), self.now_ms)

    def _flush(self, pick: int) -> None:
        if self.transactional:
            self._checkpoint()
        else:
            self._settle(pick)

    def _settle(self, pick: int | None) -> None:
        """At least once: the producer confirms what it sent, in order, until it gives up on
        one (about one send in four; `pick` None: never): that one and every later one failed.
        (The idempotent producer keeps a partition's order: nothing after a failed send is
        written before it.)"""
        delivered = self.delivered
        seen = [0 if pick is None else pick, False]

        def outcome(sent: Sent) -> bool:
            seen[0] += 1
            if pick is not None and seen[0] % 4 == 0:
                seen[1] = True
            if seen[1]:
                return False
            delivered.add(id(sent))
            return True

        self.d.emitter.settle(outcome)
        # No tick here: an input handled before the failures' wake-up tick must announce the
        # outbox again before its own commit (tests/coordinator/test_announcer.py).

    def _checkpoint(self) -> None:
        if self.transactional:
            self.d.checkpoint(self.now_ms)
            self.committed = len(self.d.emitter.sent)
            self.snapshot = (dict(self.d.store.data), dict(self.d.replay_store.data))

    def _restart(self) -> None:
        """A takeover by a new owner; transactional, the open transaction is aborted."""
        d = self.d
        if self.transactional:
            del d.emitter.sent[self.committed :]
            store, replay_store = self.snapshot
            d.store.data = dict(store)
            d.replay_store.data = dict(replay_store)
        self.history += self._visible()
        self.gone.append(d.emitter.sent)
        self.committed = 0
        self.d = d.restart()
        self.d.assign(SID)

    def finish(self) -> None:
        """Let every stream settle: deliveries confirmed, ticks until nothing is due."""
        for _ in range(3):
            self.now_ms += 61_000
            if not self.transactional:
                self._settle(None)
            self.d.caught_up(SID)
            self.d.tick(self.now_ms)
            self._checkpoint()
            self.check()
        assert self.d.processor.stats["stream_errors"] == 0


actions = st.lists(
    st.tuples(
        st.sampled_from([kind for kind, weight in ACTIONS for _ in range(weight)]),
        st.integers(min_value=0, max_value=2**20),
    ),
    min_size=30,
    max_size=80,
)


@pytest.mark.parametrize("transactional", [False, True], ids=["faust", "confluent"])
@settings(
    max_examples=120,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(steps=actions)
def test_random_interleavings_keep_one_chain_and_honest_replays(
    transactional: bool, steps: list[Action]
) -> None:
    run = Run(transactional)
    for kind, pick in steps:
        run.step(kind, pick)
        if kind in ("flush", "restart", "tick"):
            run.check()
    run.finish()
    replayed = sum(1 for c in run.commits() if c["windows"][0]["reason"] == "replayed")
    event(f"replayed commits: {min(replayed, 3)}")
    event(f"replay tasks: {min(len(run.tasks(replay=True)), 3)}")


def test_the_interleavings_reach_replayed_commits() -> None:
    """The actions can make a replay succeed (else the checks above would check nothing)."""
    for transactional in (False, True):
        run = Run(transactional)
        plan: list[Action] = [("tick", 7), ("flush", 1), ("live_nack", 0), ("live_nack", 1)]
        plan += [("flush", 1), ("replay", 0), ("flush", 1), ("replay_ack", 0), ("flush", 1)]
        for kind, pick in plan:
            run.step(kind, pick)
        run.finish()
        replayed = [c for c in run.commits() if c["windows"][0]["reason"] == "replayed"]
        assert len(replayed) >= 1, transactional
