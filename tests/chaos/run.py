"""The fault-injection run: a broker, two coordinators, two synthetic workers, 200 streams,
kills, a SIGSTOP, a broker restart, a fuzz burst, and an auditor. `python -m tests.chaos --help`.
With `--brokers 3`, a cluster of three nodes and its broker faults (cluster_faults.py).

Exit status 0 only when the auditor found 0 violations and no process exited or crashed
without the run asking (exit_audit.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from streams.coordinator.settings import default_instance
from streams.dev.broker import LocalBroker, LocalCluster, ephemeral_broker
from streams.topics import Topics
from tests.support.coordinator import CoordinatorProcess

from .auditor import Auditor, Incarnation, Replay, Seen, StreamPlan
from .cluster_faults import ClusterFaults
from .exit_audit import Exit, Fault, FaultLog, commit_stalls
from .plan import Upsert, bad_inputs, incarnation, plan_of, streams
from .processes import SESSION_TIMEOUT_MS, Managed, Worker, say
from .reader import AuditReader

PARTITIONS = 6
# The outage guard's settings, shortened: counts older than HEALTH_STALE_MS are dropped, and a
# coordinator killed in the source's outage stays down OUTAGE_DOWN_S, longer than that.
# The stale time stays above a takeover, as docs/concepts.md asks (session timeout, a dead owner's
# transaction timing out, the rebuild).
HEALTH_STALE_MS = 20_000
OUTAGE_MAX_HOLD_MS = 40_000
OUTAGE_DOWN_S = 24.0
FLUSH_S = 120
OUTAGE_KILLS_AT_S = (14.0, 20.0)  # into the run, after the replay-* streams' outage (12 s)
AUDITED = ("commits", "bypassed", "tasks", "results", "rejected")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def wait_until(what: str, check: Any, timeout_s: float, step_s: float = 0.5) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(step_s)


# -- the run -------------------------------------------------------------------------------------


class Chaos:
    def __init__(self, args: argparse.Namespace, home: Path) -> None:
        self.args = args
        self.home = home
        self.rng = random.Random(args.seed)
        self.prefix = f"chaos-{uuid.uuid4().hex[:8]}"
        self.broker: LocalBroker | LocalCluster
        self.cluster: LocalCluster | None = None
        if args.brokers > 1:
            self.broker = self.cluster = LocalCluster(home / "cluster", size=args.brokers)
        else:
            self.broker = ephemeral_broker(home / "broker")
        self.kafka = self.broker.settings
        self.cluster_faults: ClusterFaults | None = None
        self.faults: dict[str, int] = defaultdict(int)
        self.fault_log: list[str] = []  # what the run did not do, and why
        self.windows = FaultLog()  # every fault with its window, for the stalls of commits
        self.exits: list[Exit] = []  # processes that ended without the run asking
        self.commit_reads: dict[int, list[int]] = defaultdict(list)  # partition -> read times
        self.managed: list[Managed] = []
        self.plans: dict[str, StreamPlan] = {}
        self.bad: set[tuple[str, int, int]] = set()
        self.bad_pending = 0
        self.replays: list[Replay] = []
        self.seen: list[Seen] = []
        self.seen_lock = threading.Lock()
        self.marks: dict[str, int] = {}  # stream -> the downstream_ms of its latest commit
        self.bypassed_seen: dict[str, list[int]] = defaultdict(list)  # stream -> windows' end_ms
        self.last_task_ms: dict[str, int] = {}
        self.listed: dict[str, Any] = {}  # bypassed key -> its latest value (None: a tombstone)
        self.resent: set[tuple[str, int, int]] = set()  # replays asked again: may find none
        self.halt = threading.Event()
        self.errors: list[str] = []

    # -- setup -------------------------------------------------------------------------------

    def fault(self, kind: str, detail: str) -> Fault:
        """Count and log a fault begun now; the caller sets its `end_ms` once it is over."""
        self.faults[kind] += 1
        say(f"fault {kind}: {detail}")
        return self.windows.begin(kind, detail, now_ms())

    def start(self) -> None:
        self.broker.start()
        say(f"broker on {self.broker.bootstrap_servers}, prefix {self.prefix}")
        if self.cluster is not None:
            topics = Topics(self.prefix)
            eos = self.args.engine == "confluent"
            self.cluster_faults = ClusterFaults(
                self.cluster, topics.results,
                [f"{topics.eos_group}-{default_instance(self.home / f'coordinator-{i}')}"
                 for i in range(2)] if eos else [],
                topics.eos_group if eos else topics.app_id,
                self.fault, say, random.Random(self.args.seed + 1), self.halt,
            )  # fmt: skip
        env = {
            "TIDEMARK_SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS),
            "TIDEMARK_HEALTH_STALE_MS": str(HEALTH_STALE_MS),
            "TIDEMARK_OUTAGE_MAX_HOLD_MS": str(OUTAGE_MAX_HOLD_MS),
        }
        for i in range(2):
            data = self.home / f"coordinator-{i}"
            proc = CoordinatorProcess(
                self.kafka, self.prefix, data, self.home / f"coordinator-{i}.log",
                partitions=PARTITIONS, engine=self.args.engine, env=env,
            )  # fmt: skip
            self.managed.append(Managed(f"coordinator-{i}", proc, data))
        first = self.managed[0].proc
        assert isinstance(first, CoordinatorProcess)
        first.start().wait_ready(timeout_s=90)  # it creates the topics
        self.managed[1].start()
        for i in range(2):
            worker = Worker(self.kafka, self.prefix, self.home / f"worker-{i}.log", f"worker-{i}")
            self.managed.append(Managed(f"worker-{i}", worker, None))
            worker.start()
        self.producer = Producer(self.kafka.producer(**{"linger.ms": 5, "log_level": 2}))
        self.reader = AuditReader(self.kafka, self.prefix, AUDITED, self._observe, say, self.halt)

    def stop(self) -> None:
        self.halt.set()
        for m in self.managed:
            if m.stopped:
                m.proc.resume() if isinstance(m.proc, CoordinatorProcess) else None
            try:
                m.stop()
            except Exception as exc:  # never leave a process behind
                say(f"stopping {m.name}: {exc}")
                m.kill()
        self.broker.stop()

    # -- producing ---------------------------------------------------------------------------

    def topic(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def send(self, topic: str, value: Any, key: str) -> None:
        self.producer.produce(self.topic(topic), json.dumps(value).encode(), key.encode())

    def flush(self, what: str) -> None:
        # Past a broker restart, which took up to 41 s on a loaded machine (with the source's
        # outage, the re-creations wait for the coordinators and can meet it).
        left = self.producer.flush(FLUSH_S)
        if left:
            raise TimeoutError(f"{left} messages of {what} not delivered in {FLUSH_S} s")

    def create(self, upserts: list[Upsert]) -> None:
        created = now_ms()
        for u in upserts:
            self.send(
                "control", {"type": "upsert", "stream_id": u.stream_id, **u.fields}, u.stream_id
            )
        self.flush("the upserts")
        self.plans.update(plan_of(upserts, created))

    def send_bad(self, count: int) -> None:
        """Produce `count` inputs made bad on purpose; remember where each one landed."""
        lock = threading.Lock()

        def landed(err: Any, msg: Any) -> None:
            with lock:
                self.bad_pending -= 1
                if err is None:
                    self.bad.add((msg.topic(), msg.partition(), msg.offset()))
                else:
                    self.errors.append(f"a bad input was not delivered: {err}")

        real = sorted(self.plans)
        for bad in bad_inputs(self.rng, count, PARTITIONS, real):
            extra = {} if bad.partition is None else {"partition": bad.partition}
            with lock:
                self.bad_pending += 1
            while True:
                try:
                    self.producer.produce(
                        self.topic(bad.topic), bad.value, bad.key, on_delivery=landed, **extra
                    )
                    break
                except BufferError:
                    self.producer.poll(0.1)
            self.producer.poll(0)
        self.flush("the bad inputs")

    # -- the auditor's consumer --------------------------------------------------------------

    def _observe(self, rec: Seen) -> None:
        with self.seen_lock:
            self.seen.append(rec)
        if rec.topic == "bypassed":
            key = (rec.key or b"").decode()
            self.listed[key] = None if rec.value is None else json.loads(rec.value)
        if rec.value is None:
            return
        if rec.topic == "commits":
            self.commit_reads[rec.partition].append(now_ms())
            commit = json.loads(rec.value)
            if not all(w["reason"] == "replayed" for w in commit["windows"]):
                self.marks[commit["stream_id"]] = commit["downstream_ms"]
        elif rec.topic == "bypassed":
            value = json.loads(rec.value)
            self.bypassed_seen[value["stream_id"]].append(value["end_ms"])
        elif rec.topic == "tasks":
            task = json.loads(rec.value)
            self.last_task_ms[task["stream_id"]] = now_ms()

    # -- faults ------------------------------------------------------------------------------

    def killer(self) -> None:
        """A SIGKILL of a random process every few seconds; it comes back soon after."""
        kills = 0
        while kills < self.args.kills and not self.halt.is_set():
            time.sleep(self.rng.uniform(1.5, 4.0))
            victim = self.rng.choice([m for m in self.managed if not m.stopped and not m.down])
            with victim.lock:
                victim.down = True
                victim.kill()
                wipe = victim.data is not None and self.rng.random() < 0.3
                if wipe:
                    assert victim.data is not None
                    shutil.rmtree(victim.data, ignore_errors=True)
                kills += 1
                f = self.fault("sigkill", victim.name + (" and its data folder" if wipe else ""))
            threading.Thread(target=self._restart_later, args=(victim, f), daemon=True).start()
        say(f"{kills} kills done")

    def _restart_later(self, m: Managed, f: Fault) -> None:
        time.sleep(self.rng.uniform(0.3, 2.0))
        with m.lock:
            if not self.halt.is_set():
                m.start()
            m.down = False
        f.end_ms = now_ms()

    def supervisor(self) -> None:
        """Restart a process that exited by itself (a coordinator that lost the broker), and
        keep its exit: an unplanned exit or a native crash, each a violation-class figure. Say
        at once when the auditor's thread is blocked (it cannot say so itself)."""
        while not self.halt.wait(1.0):
            blocked = self.reader.blocked()
            if blocked is not None and blocked not in self.errors:
                say(blocked)
                self.errors.append(blocked)
            for m in self.managed:
                with m.lock:
                    rc = m.proc.exited()
                    if m.down or m.stopped or rc is None or self.halt.is_set():
                        continue
                    gone = Exit(m.name, rc, now_ms(), m.output())
                    self.exits.append(gone)
                    say(f"{gone.line()}; restarted")
                    m.start()

    def stall(self) -> None:
        """One SIGSTOP of a coordinator past its session timeout, then SIGCONT."""
        coordinators = [m for m in self.managed if m.data is not None]
        m = self.rng.choice(coordinators)
        with m.lock:
            while m.down:  # being restarted after a kill
                m.lock.release()
                time.sleep(0.2)
                m.lock.acquire()
            assert isinstance(m.proc, CoordinatorProcess)
            m.proc.pause()
            m.stopped = True
        held_s = SESSION_TIMEOUT_MS / 1000 + 4
        f = self.fault("sigstop", f"{m.name} for {held_s:g} s")
        time.sleep(held_s)
        with m.lock:
            m.proc.resume()
            m.stopped = False
        f.end_ms = now_ms()
        self.fault("sigcont", m.name).end_ms = now_ms()

    def outage_faults(self, t0: float) -> None:
        """While the `source-*` streams' source is down: SIGKILL each coordinator, the first
        with its data folder deleted (it restores from the changelogs), and keep each down
        OUTAGE_DOWN_S, past the stale time. For a while no coordinator runs and every health
        entry goes stale, and the broker restart falls in the same stretch, so the first to come
        back must find the outage in its own rebuilt partitions (issue 25, defect 6)."""
        coordinators = [m for m in self.managed if m.data is not None]
        back: list[tuple[float, Managed, Fault]] = []
        for m, wipe, at_s in zip(coordinators, (True, False), OUTAGE_KILLS_AT_S, strict=True):
            time.sleep(max(0.0, t0 + at_s - time.monotonic()))
            with m.lock:
                while m.down or m.stopped:  # being restarted after a kill, or SIGSTOPped
                    m.lock.release()
                    time.sleep(0.2)
                    m.lock.acquire()
                m.down = True
                m.kill()
                if wipe:
                    assert m.data is not None
                    shutil.rmtree(m.data, ignore_errors=True)
            f = self.fault("outage-kill", f"{m.name}{' and its data folder' if wipe else ''}, "
                           f"down {OUTAGE_DOWN_S:g} s in the source's outage")  # fmt: skip
            back.append((time.monotonic() + OUTAGE_DOWN_S, m, f))
        for at, m, f in back:
            time.sleep(max(0.0, at - time.monotonic()))
            with m.lock:
                if not self.halt.is_set():
                    m.start()
                m.down = False
            f.end_ms = now_ms()

    def outage_thread(self, t0: float) -> None:
        try:
            self.outage_faults(t0)
        except Exception as exc:  # the run cannot say what it did not do: a violation
            self.errors.append(f"outage faults: {type(exc).__name__}: {exc}")

    def restart_broker(self) -> None:
        """The broker's restart; in a cluster, a random node's (ClusterFaults.node_restart)."""
        began = time.monotonic()
        if self.cluster_faults is not None:
            self.cluster_faults.node_restart()
        else:
            f = self.fault("broker-restart", "stop, then start on the same data")
            self.broker.stop()
            time.sleep(1)
            self.broker.start()
            f.end_ms = now_ms()
        say(f"broker back after {time.monotonic() - began:.1f} s")

    # -- the scenario ------------------------------------------------------------------------

    def scenario(self, t0: float) -> None:
        """Controls while the faults run: pause/resume, delete/re-create, replay, bad inputs."""

        def at(seconds: float) -> None:
            time.sleep(max(0.0, t0 + seconds - time.monotonic()))

        by_kind: dict[str, list[str]] = defaultdict(list)
        for sid, plan in self.plans.items():
            by_kind[plan.kind].append(sid)
        at(5)
        self.send_bad(60)
        say("60 hand-drawn bad inputs sent")
        at(8)
        for sid in by_kind["pause"]:
            self.send("control", {"type": "pause", "stream_id": sid}, sid)
        self.flush("pauses")
        say("paused the pause-* streams")
        at(12)
        deleted_ms = now_ms()
        for sid in by_kind["recreate"]:
            self.send("control", {"type": "delete", "stream_id": sid}, sid)
            self.plans[sid].incarnations[-1].deleted_ms = deleted_ms
        self.flush("deletes")
        say("deleted the recreate-* streams")
        at(18)
        for sid in by_kind["pause"]:
            self.send("control", {"type": "resume", "stream_id": sid}, sid)
        self.flush("resumes")
        say("resumed the pause-* streams")
        self._recreate(by_kind["recreate"], deleted_ms)
        at(30)
        say(f"fuzz burst: {self.args.fuzz} generated bad inputs")
        self.send_bad(self.args.fuzz)
        say("fuzz burst sent")
        self._replay(by_kind["replay"])

    def scenario_thread(self, t0: float) -> None:
        try:
            self.scenario(t0)
        except Exception as exc:  # the run cannot say what it did not do: a violation
            self.errors.append(f"scenario: {type(exc).__name__}: {exc}")
            say(f"the scenario failed: {exc}")

    def _recreate(self, sids: list[str], deleted_ms: int) -> None:
        """Once no task went out for them for 6 s (coordinators up): re-create, 30 s earlier."""

        def quiet() -> bool:
            up = all(not m.down and not m.stopped for m in self.managed if m.data is not None)
            return up and all(now_ms() - self.last_task_ms.get(s, deleted_ms) > 6000 for s in sids)

        wait_until("the deleted streams to fall quiet", quiet, timeout_s=120)
        upserts = []
        for sid in sids:
            old = self.plans[sid].incarnations[-1]
            fields = {
                "start_ms": old.origin_ms - 30_000, "window_ms": 1000, "step_ms": 1000,
                "task_timeout_ms": 10_000, "max_in_flight": 4, "bypass_after_ms": 20_000,
                "retry": {"strategy": "fixed", "interval_ms": 300},
            }  # fmt: skip
            upserts.append((sid, fields))
        created = now_ms()
        for sid, fields in upserts:
            self.send("control", {"type": "upsert", "stream_id": sid, **fields}, sid)
            inc: Incarnation = incarnation(fields, created)
            self.plans[sid].incarnations.append(inc)
        self.flush("re-creations")
        say("re-created the recreate-* streams")

    def _replay(self, sids: list[str]) -> None:
        """Once the outage is over and bypasses were seen: replay the outage's windows."""
        for sid in sids:
            inc = self.plans[sid].incarnations[0]
            until = inc.created_ms + 12_000
            try:
                wait_until(
                    f"{sid}'s outage to end with windows bypassed",
                    lambda s=sid, u=until: now_ms() > u + 3000 and self.bypassed_seen.get(s),  # type: ignore[misc]
                    timeout_s=60,
                )
            except TimeoutError:
                # Its owner was down through the whole outage: nothing failed, nothing to replay.
                say(f"{sid}: no window bypassed in its outage, no replay")
                self.fault_log.append(f"{sid}: no window bypassed in its outage, not replayed")
                continue
            # Up to the last window seen bypassed: under load a window after the outage can be
            # bypassed too (its attempts timed out), and a range without one is rejected.
            with self.seen_lock:
                to_ms = max(until + 1000, *self.bypassed_seen[sid])
            rp = Replay(sid, inc.origin_ms, to_ms, now_ms())
            self.send("control", {"type": "replay", "stream_id": sid,
                                  "from_ms": rp.from_ms, "to_ms": rp.to_ms}, sid)  # fmt: skip
            self.replays.append(rp)
        self.flush("replays")
        say("replays sent")

    # -- the end -----------------------------------------------------------------------------

    def settle(self, target_ms: int) -> None:
        """Wait for every stream to catch up, every bad input to be rejected, every replay."""

        def behind() -> list[str]:
            out = []
            for sid, plan in self.plans.items():
                inc = plan.incarnations[-1]
                if inc.deleted_ms is None and self.marks.get(sid, 0) < target_ms - inc.window_ms:
                    out.append(sid)
            return out

        def rejected() -> int:
            with self.seen_lock:
                return sum(1 for r in self.seen if r.topic == "rejected")

        try:
            # The backlog grows with the length of the faults: 3 s of catching up per kill.
            catch_up_s = max(60, 3 * self.args.kills)
            wait_until("every stream to catch up", lambda: not behind(), catch_up_s, step_s=1)
        except TimeoutError as exc:
            say(f"{exc}: {behind()[:10]}")
        try:
            wait_until("the bad inputs' rejections", lambda: rejected() >= len(self.bad),
                       timeout_s=180, step_s=1)  # fmt: skip
        except TimeoutError as exc:
            say(f"{exc}: {rejected()} of {len(self.bad)}")
        self._replay_again()
        time.sleep(8)  # replays, tombstones and repeats still on their way

    def _still_listed(self, rp: Replay) -> list[str]:
        return [
            key
            for key, value in list(self.listed.items())
            if value is not None
            and value["stream_id"] == rp.stream_id
            and value["bypassed_ms"] < rp.sent_ms
            and value["end_ms"] > rp.from_ms
            and value["start_ms"] < rp.to_ms
        ]

    def _replay_again(self) -> None:
        """A replay whose task failed (timed out while everything was slow) leaves its window
        listed: ask again, as an operator would, up to 2 times."""

        def landed(err: Any, msg: Any) -> None:  # on this thread, inside flush()
            if err is None:
                self.resent.add((msg.topic(), msg.partition(), msg.offset()))

        for _ in range(2):
            pending = [rp for rp in self.replays if self._still_listed(rp)]
            if not pending:
                return

            for rp in {rp.stream_id: rp for rp in pending}.values():
                value = {"type": "replay", "stream_id": rp.stream_id,
                         "from_ms": rp.from_ms, "to_ms": rp.to_ms}  # fmt: skip
                self.producer.produce(self.topic("control"), json.dumps(value).encode(),
                                      rp.stream_id.encode(), on_delivery=landed)  # fmt: skip
                self.replays.append(Replay(rp.stream_id, rp.from_ms, rp.to_ms, now_ms()))
            self.flush("replays asked again")
            say(f"replays asked again for {sorted({rp.stream_id for rp in pending})}")
            try:
                wait_until("replayed windows to be tombstoned",
                           lambda: not any(self._still_listed(rp) for rp in self.replays),
                           timeout_s=30, step_s=1)  # fmt: skip
            except TimeoutError:
                continue


def run(args: argparse.Namespace) -> int:
    home = Path(tempfile.mkdtemp(prefix="tidemark-chaos-"))
    chaos = Chaos(args, home)
    began = time.monotonic()
    threads: list[threading.Thread] = []
    try:
        chaos.start()
        reader = threading.Thread(target=chaos.reader.run, name="auditor", daemon=True)
        reader.start()
        threads.append(reader)
        t0 = time.monotonic()
        chaos.create(streams(now_ms(), args.streams))
        say(f"{len(chaos.plans)} streams created; faults begin ({args.kills} kills)")
        killer = threading.Thread(target=chaos.killer, name="killer", daemon=True)
        supervisor = threading.Thread(target=chaos.supervisor, name="supervisor", daemon=True)
        scenario = threading.Thread(
            target=chaos.scenario_thread, args=(t0,), name="scenario", daemon=True
        )
        outage = threading.Thread(
            target=chaos.outage_thread, args=(t0,), name="outage", daemon=True
        )
        for t in (killer, supervisor, scenario, outage):
            t.start()
        threads += [killer, supervisor, scenario, outage]
        cluster_faults = None
        if chaos.cluster_faults is not None:
            cluster_faults = threading.Thread(
                target=chaos.cluster_faults.run, name="cluster-faults", daemon=True
            )
            threads.append(cluster_faults)
        time.sleep(10)
        if args.stall:
            chaos.stall()
        time.sleep(max(0.0, t0 + 24 - time.monotonic()))
        if args.broker_restart:
            chaos.restart_broker()
        if cluster_faults is not None:  # after the node restart: one broker fault at a time
            cluster_faults.start()
        killer.join()
        outage.join(300)
        scenario.join(600)
        if scenario.is_alive():
            raise TimeoutError("the scenario did not finish in 600 s")
        if cluster_faults is not None:
            cluster_faults.join(1200)
            if cluster_faults.is_alive():
                raise TimeoutError("the cluster faults did not finish in 1200 s")
        faults_end = now_ms()
        say("faults over; waiting for every stream to catch up")
        running = lambda: all(m.proc.exited() is None and not m.down for m in chaos.managed)  # noqa: E731
        wait_until("every process to run", running, timeout_s=60)
        chaos.settle(faults_end - 3000)
        # Never audit a partial read: every partition read to its end (last stable offset).
        chaos.errors += chaos.reader.read_to_end(timeout_s=60)
        read_end_ms = now_ms()
        say(chaos.reader.progress())
        chaos.halt.set()
        reader.join(30)
        if reader.is_alive():
            chaos.errors.append("the auditor's reading thread did not stop within 30 s")
        auditor = Auditor(chaos.plans, args.engine, chaos.bad, chaos.replays, chaos.resent,
                          max_hold_ms=OUTAGE_MAX_HOLD_MS)  # fmt: skip
        with chaos.seen_lock:
            seen = list(chaos.seen)
        audit = auditor.audit(seen, faults_end - 3000)
        if chaos.cluster_faults is not None:
            chaos.errors += chaos.cluster_faults.errors
        violations = chaos.errors + audit.violations
    except BaseException:
        chaos.stop()
        say(f"logs kept in {home}")
        raise
    chaos.stop()
    for t in threads:
        t.join(30)
    print(f"\n== chaos run, engine {args.engine}, seed {args.seed}, "
          f"{time.monotonic() - began:.0f} s ==")  # fmt: skip
    print("faults injected: " + ", ".join(f"{n} {k}" for k, n in sorted(chaos.faults.items())))
    for line in [f.line() for f in chaos.windows.faults] + chaos.fault_log:
        print(f"  {line}")
    print(
        f"streams: {len(chaos.plans)}; windows audited: {audit.windows} "
        f"({audit.acks} acked, {audit.bypasses} bypassed, {audit.repeats} commits repeated, "
        f"{audit.replayed} replayed and tombstoned); records read: {len(seen)}"
    )
    for recovery in audit.recoveries:
        print(recovery.line())
    # A stall renewed and then read to the end audits a whole read: said, not a violation.
    print(f"auditor's consumer: {chaos.reader.renewals} renewals after a stall; "
          f"{chaos.reader.progress()}")  # fmt: skip
    for line in chaos.reader.stalls:
        print(f"  {line}")
    print(f"bad inputs: {len(chaos.bad)} sent, {audit.rejected_bad} rejected; "
          f"{audit.rejected_late} late results of deleted streams rejected")  # fmt: skip
    print("longest stall of commits after each kind of fault (a partition's longest time "
          "without a new record once the fault began, as the auditor read them):")  # fmt: skip
    for stall in commit_stalls(chaos.commit_reads, chaos.windows.faults, read_end_ms):
        print(f"  {stall.line()}")
    native = sum(1 for e in chaos.exits if e.native)
    print(f"{len(chaos.exits)} unplanned exits ({native} native crashes)")
    for e in chaos.exits:
        print(f"  {e.line()}")
    for v in violations:
        print(f"VIOLATION {v}")
    print(f"{len(violations)} violations")
    if violations or chaos.exits:
        with (home / "records.jsonl").open("w") as out:
            for r in seen:
                value = None if r.value is None else r.value.decode(errors="replace")
                key = None if r.key is None else r.key.decode(errors="replace")
                out.write(json.dumps([r.topic, r.partition, r.offset, key, value]) + "\n")
        print(f"logs and the records read kept in {home}")
    else:
        shutil.rmtree(home, ignore_errors=True)
    return 0 if not violations and not chaos.exits else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--kills", type=int, default=int(os.environ.get("CHAOS_KILLS", 100)))
    parser.add_argument("--engine", default=os.environ.get("CHAOS_ENGINE", "confluent"),
                        choices=["confluent", "faust"])  # fmt: skip
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--fuzz", type=int, default=int(os.environ.get("CHAOS_FUZZ", 100_000)),
                        help="bad inputs in the fuzz burst")  # fmt: skip
    parser.add_argument("--seed", type=int, default=int(os.environ.get("CHAOS_SEED", 0)) or None)
    parser.add_argument("--no-stall", dest="stall", action="store_false",
                        help="no SIGSTOP of a coordinator")  # fmt: skip
    parser.add_argument("--no-broker-restart", dest="broker_restart", action="store_false")
    parser.add_argument("--brokers", type=int, default=int(os.environ.get("CHAOS_BROKERS", 1)),
                        help="1: one broker; 3: a cluster (replication 3, min ISR 2) and its "
                        "broker faults")  # fmt: skip
    args = parser.parse_args(argv)

    def terminate(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)  # through run()'s cleanup: nothing is left running

    signal.signal(signal.SIGTERM, terminate)
    if args.seed is None:
        args.seed = random.randrange(1, 10**6)
    return run(args)
