"""The outage guard end to end on the real broker, on both engines: `tidemark coordinator`
processes, the `health` topic between them, a stand-in worker.

Durations are short: a bypass 3 s after the first failure, retries every 500 ms, counts
published every 200 ms. Four streams on source S fail together (an outage: their bypasses are
held); one stream on source R fails alone (bypassed on time). Stale counts expire by age
(TIDEMARK_HEALTH_STALE_MS, a few seconds here): a survivor stops holding on a dead coordinator's
counts, and `tidemark status` stops showing an outage nobody publishes any more.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from streams.cli import app
from streams.coordinator.processor import partition_of
from streams.coordinator.settings import default_instance
from streams.kafka.settings import KafkaSettings
from streams.outages import HealthReader
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Feed, Responder, Tail

pytestmark = pytest.mark.broker

ENGINES = ("confluent", "faust")
# `make test` keeps one case of each rule on the default engine (a shared outage held and
# released, the hold's bound, a restart during an outage that lost its disk); `make test-long`
# runs the rest: the Faust engine, the view across coordinators, dead coordinators' counts.
LONG = pytest.mark.long
ENGINES_LONG_FAUST = ("confluent", pytest.param("faust", marks=LONG))
FAST = {
    "bypass_after_ms": 3000,
    "retry": {"strategy": "fixed", "interval_ms": 500},
    "task_timeout_ms": 2000,
}
GUARD = {"TIDEMARK_HEALTH_PUBLISH_MS": "200", "TIDEMARK_HEALTH_STALE_MS": "20000"}
WINDOW = 60_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Source:
    """Whether each source answers: the worker acks a stream whose source is up, else nacks."""

    def __init__(self, down: set[str]) -> None:
        self.down = set(down)
        self.lock = threading.Lock()

    def policy(self, sources: dict[str, str]) -> Any:
        def answer(task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
            with self.lock:
                failing = sources[task["stream_id"]] in self.down
            if failing:
                return "nack", {"error": {"kind": "no_data", "message": "source down"}}
            return "ack", {"ack_ms": task["end_ms"]}

        return answer

    def recover(self, source: str) -> None:
        with self.lock:
            self.down.discard(source)


def create(feed: Feed, streams: dict[str, str], start_ms: int, **overrides: Any) -> None:
    config = {**FAST, **overrides}
    for stream_id, source in streams.items():
        feed.upsert(stream_id, start_ms, window_ms=WINDOW, step_ms=15_000, source=source, **config)


def bypassed(tail: Tail, stream_ids: list[str]) -> list[dict[str, Any]]:
    return [b for s in stream_ids for b in tail.values("bypassed", s)]


def first_failure_ms(tail: Tail, stream_id: str) -> int:
    return min(t["dispatched_ms"] for t in tail.values("tasks", stream_id))


def split(a: CoordinatorProcess, b: CoordinatorProcess, settle_s: float = 2.0) -> set[int]:
    """Wait until the two coordinators share the four partitions, the same for `settle_s`;
    those `a` owns. On a loaded machine a Faust coordinator once never applied an upsert
    produced just as the split first showed (no task, no state, nothing logged), likely Faust
    skipping a record fetched across the rebalance (its generation check, faust-streaming
    PR 223); an input so lost is one the at-least-once caveats for Faust cover
    (docs/guarantees.md)."""
    deadline = time.monotonic() + 60
    seen: tuple[set[int], float] | None = None
    while time.monotonic() < deadline:
        ha, hb = a.health(), b.health()
        owned = sorted((ha or {}).get("partitions", []) + (hb or {}).get("partitions", []))
        if ha and hb and ha["partitions"] and hb["partitions"] and owned == [0, 1, 2, 3]:
            on_a = set(ha["partitions"])
            if seen is None or seen[0] != on_a:
                seen = (on_a, time.monotonic())
            elif time.monotonic() - seen[1] >= settle_s:
                return on_a
        else:
            seen = None
        time.sleep(0.3)
    raise AssertionError(f"no split: {a.health()} {b.health()}")


def three_each(unique: str, on_a: set[int]) -> tuple[list[str], list[str]]:
    """Three stream ids on `a`'s partitions, three on the others'."""
    mine: list[str] = []
    theirs: list[str] = []
    for i in range(1000):
        stream_id = f"s{i}-{unique}"
        group = mine if partition_of(stream_id.encode(), 4) in on_a else theirs
        if len(group) < 3:
            group.append(stream_id)
        if len(mine) == len(theirs) == 3:
            break
    return mine, theirs


@pytest.mark.parametrize("engine", ENGINES_LONG_FAUST)
def test_a_shared_outage_holds_bypasses_a_lone_failure_does_not_and_recovery_commits(
    kafka: KafkaSettings, unique: str, tmp_path: Path, engine: str
) -> None:
    prefix = f"outage-{unique}"
    s_streams = [f"s{i}-{unique}" for i in range(4)]
    r_stream = f"r-{unique}"
    sources = {**dict.fromkeys(s_streams, "S"), r_stream: "R"}
    coordinator = CoordinatorProcess(
        kafka, prefix, tmp_path / "data", tmp_path / "log", engine=engine, env=GUARD
    )
    coordinator.start().wait_ready()
    feed = Feed(kafka, prefix)
    tail = Tail(kafka, prefix, ["tasks", "commits", "bypassed"], f"t-{unique}")
    source = Source({"S", "R"})
    start = now_ms() - now_ms() % WINDOW - WINDOW  # one window due at once
    try:
        with Responder(kafka, prefix, f"w-{unique}", source.policy(sources)):
            # A held window released at recovery whose task then times out is bypassed (its
            # budget is spent: the rule). With the test process and the coordinator stopped in
            # bursts of up to 1.2 s (a loaded machine, simulated), this stand-in worker (a
            # thread of the test process) took more than FAST's 2 s to answer a released task,
            # and the window was bypassed for the worker's latency, not for anything of the
            # guard: the deadline here is one such a worker meets. Every answer is a nack or an
            # ack, so no attempt below waits on a deadline.
            create(feed, sources, start, task_timeout_ms=15_000)
            record = tail.wait_for("R's bypass", lambda: tail.values("bypassed", r_stream))[0]
            # On time: at the first failure past the 3 s budget. That failure may be a task
            # dispatched just before the budget ran out whose answer is late: a timeout (2 s)
            # and the next tick bound it, plus a loaded machine's pauses (8 s was seen with a
            # full suite and two other sessions at work). A window held by the guard (the
            # defect this rules out) would wait for its max hold: 6 hours by default.
            assert 3000 <= record["bypassed_ms"] - record["first_failed_ms"] < 15_000
            s_failed_ms = max(first_failure_ms(tail, s) for s in s_streams)
            while now_ms() < s_failed_ms + 3 * FAST["bypass_after_ms"]:  # three budgets
                tail.poll()
            assert bypassed(tail, s_streams) == [], "a bypass of the outage's streams"
            attempts = {s: max(t["attempt"] for t in tail.values("tasks", s)) for s in s_streams}
            # they kept retrying: 9 s of 500 ms retries make 6 or more on a quiet machine; in a
            # full `make test` a nack's round trip took over 1.5 s and made 5
            assert min(attempts.values()) >= 4, attempts

            source.recover("S")
            recovered_ms = now_ms()

            def acked_after_hold() -> list[dict[str, Any]]:
                first = [
                    w
                    for s in s_streams
                    for c in tail.values("commits", s)
                    for w in c["windows"]
                    if w["start_ms"] == start
                ]
                return first if len(first) == len(s_streams) else []

            windows = tail.wait_for("the held windows to commit", acked_after_hold)
            assert {w["reason"] for w in windows} == {"ack"}, bypassed(tail, s_streams)
            for w in windows:
                assert 0 < w["held_ms"] <= recovered_ms - s_failed_ms + 2000, w
            tail.drain()
            assert bypassed(tail, s_streams) == []
    finally:
        tail.close()
        coordinator.stop()


@pytest.mark.parametrize("engine", ENGINES_LONG_FAUST)
def test_after_outage_max_hold_ms_bypasses_resume(
    kafka: KafkaSettings, unique: str, tmp_path: Path, engine: str
) -> None:
    prefix = f"hold-{unique}"
    s_streams = [f"s{i}-{unique}" for i in range(4)]
    coordinator = CoordinatorProcess(
        kafka,
        prefix,
        tmp_path / "data",
        tmp_path / "log",
        engine=engine,
        env={**GUARD, "TIDEMARK_OUTAGE_MAX_HOLD_MS": "3000"},
    )
    coordinator.start().wait_ready()
    feed = Feed(kafka, prefix)
    tail = Tail(kafka, prefix, ["tasks", "bypassed"], f"t-{unique}")
    start = now_ms() - now_ms() % WINDOW - WINDOW
    try:
        with Responder(kafka, prefix, f"w-{unique}", Source({"S"}).policy(
            dict.fromkeys(s_streams, "S"))):  # fmt: skip
            create(feed, dict.fromkeys(s_streams, "S"), start)
            records = tail.wait_for(
                "every stream bypassed after its hold",
                lambda: (found := bypassed(tail, s_streams)) and len(found) >= 4 and found,
            )
            for record in records[:4]:
                held_for_ms = record["bypassed_ms"] - record["first_failed_ms"]
                # the budget (3 s), then the hold (3 s): not before, and not much later (the
                # next failure after it; 10.15 s was seen in a full `make test`)
                assert 6000 <= held_for_ms < 15_000, record
    finally:
        tail.close()
        coordinator.stop()


@LONG
@pytest.mark.parametrize("engine", ENGINES)
def test_the_view_crosses_coordinators_and_the_hold_survives_a_sigkill(
    kafka: KafkaSettings, unique: str, tmp_path: Path, engine: str
) -> None:
    prefix = f"pair-{unique}"
    # Five failing streams make an outage: each coordinator owns three, so only the counts it
    # reads from the other one can make it hold. A dead coordinator's counts must outlast the
    # takeover (a session, and with the confluent engine its open transaction's timeout).
    env = {
        **GUARD,
        "TIDEMARK_OUTAGE_MIN_STREAMS": "5",
        "TIDEMARK_SESSION_TIMEOUT_MS": "6000",
        "TIDEMARK_HEALTH_STALE_MS": "25000",
    }
    a, b = (
        CoordinatorProcess(
            kafka, prefix, tmp_path / n, tmp_path / f"{n}.log", 4, engine=engine, env=env
        )
        for n in "ab"
    )
    a.start().wait_ready(partitions=4)
    b.start()
    tail = Tail(kafka, prefix, ["tasks", "bypassed"], f"t-{unique}")
    try:
        mine, theirs = three_each(unique, split(a, b))
        failing = sorted(mine + theirs)
        feed = Feed(kafka, prefix)
        start = now_ms() - now_ms() % WINDOW - WINDOW
        with Responder(kafka, prefix, f"w-{unique}", Source({"S"}).policy(
            dict.fromkeys(failing, "S"))):  # fmt: skip
            create(feed, dict.fromkeys(failing, "S"), start)
            first_ms = tail.wait_for(
                "every stream's first attempt",
                lambda: (
                    all(tail.values("tasks", s) for s in failing)
                    and max(first_failure_ms(tail, s) for s in failing)
                ),
            )
            while now_ms() < first_ms + 3 * FAST["bypass_after_ms"]:
                tail.poll()
            assert bypassed(tail, failing) == [], "the view did not cross the processes"
            b.kill()  # SIGKILL during the outage: its last counts stay on `health` meanwhile
            killed_ms = now_ms()
            a.wait_ready(partitions=4, timeout_s=60)
            while now_ms() < killed_ms + 20_000:  # the takeover, and more
                tail.poll()
            assert bypassed(tail, failing) == [], "the hold did not survive the kill"
            reader = HealthReader(kafka, f"{prefix}.health")
            try:
                entries = reader.refresh(10)
            finally:
                reader.close()
            # The survivor now publishes every partition: the dead one's counts are gone.
            assert {e.partition for e in entries} == {0, 1, 2, 3}
            assert {e.owner for e in entries} == {default_instance(tmp_path / "a")}
            assert sum(e.sources["S"].failing for e in entries if "S" in e.sources) == 6
    finally:
        tail.close()
        b.kill()
        a.stop()


@LONG
@pytest.mark.parametrize("engine", ENGINES)
def test_a_dead_coordinators_counts_expire_by_age_and_the_survivors_hold_ends(
    kafka: KafkaSettings, unique: str, tmp_path: Path, engine: str
) -> None:
    """TIDEMARK_HEALTH_STALE_MS set shorter than a takeover (which docs/concepts.md warns against):
    once the dead coordinator's last counts are older than it, the survivor decides from its
    own counts alone, which are no outage, and bypasses its streams; before that, it held them.
    Without the expiry it would hold them until the takeover, and from then on (its own counts
    of all six failing streams are an outage)."""
    prefix = f"stale-{unique}"
    stale_ms = 3000
    env = {
        **GUARD,
        "TIDEMARK_OUTAGE_MIN_STREAMS": "5",
        "TIDEMARK_SESSION_TIMEOUT_MS": "10000",  # no takeover for 10 s after the kill
        "TIDEMARK_HEALTH_STALE_MS": str(stale_ms),
    }
    a, b = (
        CoordinatorProcess(
            kafka, prefix, tmp_path / n, tmp_path / f"{n}.log", 4, engine=engine, env=env
        )
        for n in "ab"
    )
    a.start().wait_ready(partitions=4)
    b.start()
    tail = Tail(kafka, prefix, ["tasks", "bypassed"], f"t-{unique}")
    try:
        on_a = split(a, b)
        mine, theirs = three_each(unique, on_a)
        failing = sorted(mine + theirs)
        feed = Feed(kafka, prefix)
        start = now_ms() - now_ms() % WINDOW - WINDOW
        with Responder(kafka, prefix, f"w-{unique}", Source({"S"}).policy(
            dict.fromkeys(failing, "S"))):  # fmt: skip
            create(feed, dict.fromkeys(failing, "S"), start)
            first_ms = tail.wait_for(
                "every stream's first attempt",
                lambda: (
                    all(tail.values("tasks", s) for s in failing)
                    and max(first_failure_ms(tail, s) for s in failing)
                ),
            )
            while now_ms() < first_ms + 2 * FAST["bypass_after_ms"]:
                tail.poll()
            assert bypassed(tail, failing) == [], "held while both publish: six failing"
            b.kill()  # its last counts stay on `health`, and nobody refreshes them
            killed_ms = now_ms()
            records = tail.wait_for(
                "the survivor's streams bypassed once the dead one's counts went stale",
                lambda: (found := bypassed(tail, mine)) and len(found) == len(mine) and found,
                timeout_s=20,
            )
            for record in records:
                # Not at the kill: held until the counts aged past the stale time (the last
                # were published at most 200 ms before it); then at the next failure (a retry
                # every 500 ms), long before the takeover.
                assert killed_ms + stale_ms - 300 <= record["bypassed_ms"], record
                assert record["bypassed_ms"] < killed_ms + stale_ms + 4000, record
            assert bypassed(tail, theirs) == []  # the dead one's streams wait for a new owner
    finally:
        tail.close()
        b.kill()
        a.stop()


@LONG
def test_with_every_coordinator_dead_status_shows_the_outage_until_its_counts_go_stale(
    kafka: KafkaSettings, unique: str, tmp_path: Path
) -> None:
    """What operators see when the whole group dies during an outage: `tidemark status` (and
    the status page, through the same HealthReader) keeps the outage while the last counts
    are fresh, and drops it once they are older than TIDEMARK_HEALTH_STALE_MS. The read side
    is the same for both engines; the confluent one publishes here."""
    prefix = f"gone-{unique}"
    stale_ms = 8000
    s_streams = [f"s{i}-{unique}" for i in range(3)]
    coordinator = CoordinatorProcess(kafka, prefix, tmp_path / "data", tmp_path / "log", env=GUARD)
    coordinator.start().wait_ready()
    status_env = {
        "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "TIDEMARK_TOPIC_PREFIX": prefix,
        "TIDEMARK_HEALTH_STALE_MS": str(stale_ms),
    }

    def outages() -> tuple[list[dict[str, Any]], int, int]:
        """`tidemark status --output json`'s outages, and when the call began and ended."""
        began = now_ms()
        result = CliRunner().invoke(app, ["status", "--output", "json"], env=status_env)
        assert result.exit_code == 0, result.output
        found: list[dict[str, Any]] = json.loads(result.stdout)["outages"]
        return found, began, now_ms()

    try:
        with Responder(kafka, prefix, f"w-{unique}", Source({"S"}).policy(
            dict.fromkeys(s_streams, "S"))):  # fmt: skip
            create(Feed(kafka, prefix), dict.fromkeys(s_streams, "S"), now_ms() - WINDOW)
            deadline = time.monotonic() + 30
            while not (found := outages()[0]) and time.monotonic() < deadline:
                time.sleep(0.3)
            assert [(o["source"], o["failing"], o["total"]) for o in found] == [("S", 3, 3)]
            coordinator.kill()  # every coordinator of the group: nobody publishes any more
            killed_ms = now_ms()
            reader = HealthReader(kafka, f"{prefix}.health")
            try:
                last_ms = max(e.published_ms for e in reader.refresh(10))
            finally:
                reader.close()
            assert killed_ms - 2000 <= last_ms <= killed_ms  # it published until the kill
            expires_ms = last_ms + stale_ms

            found, _, ended = outages()
            assert ended < expires_ms, "too slow to see the counts while fresh"
            assert [o["source"] for o in found] == ["S"], "fresh counts of a dead coordinator"
            while True:
                found, began, ended = outages()
                if not found:
                    break
                assert began < expires_ms, f"still in outage {began - last_ms} ms after"
                time.sleep(0.3)
            assert ended >= expires_ms, f"gone {ended - last_ms} ms after the last counts"
            assert began < expires_ms + 3000
    finally:
        coordinator.kill()


@pytest.mark.parametrize("disk", [pytest.param("kept", marks=LONG), "lost"])
def test_a_coordinator_restarted_during_an_outage_bypasses_no_held_window(
    kafka: KafkaSettings, unique: str, tmp_path: Path, disk: str
) -> None:
    """Issue 25, defect 6, on the real broker (the confluent engine): four streams of S fail
    together past their budget and are held; their coordinator is SIGKILLed during the
    outage, its data folder kept or deleted (a full restore), and kept down longer than
    TIDEMARK_HEALTH_STALE_MS, so that every count on `health` is stale when it comes back and
    the nacks its predecessor never read wait in `results`. Nothing of S is bypassed before or
    after the restart while S is down (the hold, TIDEMARK_OUTAGE_MAX_HOLD_MS, is 6 hours), and
    once S recovers every window tasked during the outage commits as an ack."""
    prefix = f"restart-{unique}"
    stale_ms = 3000
    env = {
        **GUARD,
        "TIDEMARK_HEALTH_STALE_MS": str(stale_ms),
        "TIDEMARK_SESSION_TIMEOUT_MS": "6000",  # the restarted process's assignment waits for it
    }
    data = tmp_path / "data"
    s_streams = [f"s{i}-{unique}" for i in range(4)]
    coordinator = CoordinatorProcess(kafka, prefix, data, tmp_path / "log", env=env)
    coordinator.start().wait_ready()
    feed = Feed(kafka, prefix)
    tail = Tail(kafka, prefix, ["tasks", "commits", "bypassed"], f"t-{unique}")
    source = Source({"S"})
    start = now_ms() - now_ms() % WINDOW - WINDOW
    try:
        with Responder(kafka, prefix, f"w-{unique}", source.policy(dict.fromkeys(s_streams, "S"))):
            create(feed, dict.fromkeys(s_streams, "S"), start)
            s_failed_ms = tail.wait_for(
                "every stream's first attempt",
                lambda: (
                    all(tail.values("tasks", s) for s in s_streams)
                    and max(first_failure_ms(tail, s) for s in s_streams)
                ),
            )
            while now_ms() < s_failed_ms + 2 * FAST["bypass_after_ms"]:  # held by now
                tail.poll()
            assert bypassed(tail, s_streams) == [], "no outage before the restart"
            coordinator.kill()  # its in-flight tasks are nacked into `results` meanwhile
            killed_ms = now_ms()
            if disk == "lost":
                shutil.rmtree(data)
            while now_ms() < killed_ms + stale_ms + 2000:  # every count on `health` stale
                tail.poll()
            coordinator.start().wait_ready()
            back_ms = now_ms()
            while now_ms() < back_ms + 2 * FAST["bypass_after_ms"]:
                tail.poll()
            assert bypassed(tail, s_streams) == [], f"bypassed after the restart ({disk} disk)"
            attempts = {s: max(t["attempt"] for t in tail.values("tasks", s)) for s in s_streams}
            assert min(attempts.values()) >= 6, attempts  # they kept retrying, before and after

            tasked = {(t["stream_id"], t["start_ms"]) for s in s_streams
                      for t in tail.values("tasks", s)}  # fmt: skip
            source.recover("S")

            def committed() -> dict[tuple[str, int], dict[str, Any]]:
                found = {
                    (s, w["start_ms"]): w
                    for s in s_streams
                    for c in tail.values("commits", s)
                    for w in c["windows"]
                }
                return found if tasked <= set(found) else {}

            windows = tail.wait_for("every window tasked in the outage to commit", committed)
            assert {windows[k]["reason"] for k in tasked} == {"ack"}
            held = [windows[(s, start)] for s in s_streams]
            assert all(w["held_ms"] and w["held_ms"] > 0 for w in held), held
            tail.drain()
            assert bypassed(tail, s_streams) == []
    finally:
        tail.close()
        coordinator.kill()
