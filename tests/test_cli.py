"""The `tidemark` CLI against the real broker: every command, and its error paths.

Commands run in-process through typer's CliRunner, except `tail` in follow mode and `worker`,
which run as processes. `streams create|list|show` and `status` watch a real coordinator whose
tasks a Responder answers (streams named `fail-*` are nacked, but not their replays); `replay`
runs once on it, and for each outcome on topics without a coordinator, the test playing its
part.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Producer
from typer.testing import CliRunner, Result

from streams.cli import app
from streams.core import StreamConfig, create_state
from streams.core.view import view_of
from streams.dev.broker import free_port
from streams.kafka.admin import create_topics, partition_counts
from streams.kafka.settings import KafkaSettings
from streams.topics import Topics
from streams.wire import encode_view
from tests.support.coordinator import CoordinatorProcess
from tests.support.kafka_io import Responder, Tail

pytestmark = pytest.mark.broker

MIN = 60_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def answer(task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Streams named fail-* fail, except when their bypassed windows are replayed."""
    if task["stream_id"].startswith("fail-") and not task.get("replay"):
        return "nack", {"error": {"kind": "no_data", "message": "nothing for this window"}}
    return "ack", {"ack_ms": task["end_ms"]}


@dataclass(frozen=True)
class Cli:
    """Runs `tidemark` in-process against one cluster and prefix."""

    kafka: KafkaSettings
    prefix: str

    @property
    def env(self) -> dict[str, str]:
        return {
            "KAFKA_BOOTSTRAP_SERVERS": self.kafka.bootstrap_servers,
            "TIDEMARK_TOPIC_PREFIX": self.prefix,
            # A live broker that is slow to answer at load is not the unreachable one the 6 s
            # default is for (tested above): a fresh run's `topics create` missed it once.
            "TIDEMARK_CONNECT_TIMEOUT_S": "30",
        }

    def __call__(self, *args: str, input: str | None = None) -> Result:
        # The connection comes from the environment, which the root options read.
        return CliRunner().invoke(app, list(args), input=input, env={**self.env, "COLUMNS": "250"})

    def ok(self, *args: str) -> str:
        result = self(*args)
        assert result.exit_code == 0, result.output
        return result.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--output", "json"))

    def shown(self, stream_id: str) -> Any:
        """`streams show` as JSON, or None while the stream is unknown (the coordinator
        publishes a stream's view once it has applied the control that made it)."""
        result = self("streams", "show", stream_id, "--output", "json")
        return json.loads(result.stdout) if result.exit_code == 0 else None


@pytest.fixture(scope="module")
def cli(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    """One coordinator (with a stand-in worker) for this module, on its own topics."""
    kafka = KafkaSettings(kafka_bootstrap)
    prefix = f"cli-{uuid.uuid4().hex[:8]}"
    home = tmp_path_factory.mktemp("cli-coordinator")
    coordinator = CoordinatorProcess(kafka, prefix, home / "data", home / "log", flush_ms=100)
    coordinator.start().wait_ready()
    try:
        with Responder(kafka, prefix, f"responder-{prefix}", answer):
            yield Cli(kafka, prefix)
    finally:
        coordinator.stop()


@pytest.fixture
def bare(kafka: KafkaSettings, unique: str) -> Cli:
    """Fresh topics with no coordinator: the test writes what a coordinator would."""
    prefix = f"bare-{unique}"
    create_topics(kafka, Topics(prefix).specs(partitions=2, replication=1))
    return Cli(kafka, prefix)


def wait_for(what: str, check: Callable[[], Any], timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def sid(kind: str = "s") -> str:
    return f"{kind}-{uuid.uuid4().hex[:6]}"


# -- input errors: reported before anything talks to Kafka -------------------------------------


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["streams", "create", "x", "--start", "now", "--window", "5x"], "--window"),
        (["streams", "create", "x", "--start", "yesterday"], "--start"),
        (["streams", "create", "x", "--start", "2026-11-29T10:00:00"], "--start"),
        (["streams", "create", "x", "--start", "now", "--retry", "sometimes"], "--retry"),
        (["streams", "create", "x", "--start", "now", "--param", "novalue"], "--param"),
        (["streams", "create", "x", "--start", "now", "--params-json", "[1]"], "--params-json"),
        (
            ["streams", "create", "x", "--start", "now", "--params-json", f'{{"n": {2**70}}}'],
            "--param (params.n)",
        ),
        (["streams", "create", "x", "--start", "now", "--step", "7s"], "--window (window_ms)"),
        (["streams", "create", "x", "--start", "now", "--timeout", "0s"], "--timeout"),
        (["streams", "update", "x", "--bypass-after", "soon"], "--bypass-after"),
        (["streams", "create", "x", "--start", "now", "--end", "soon"], "--end"),
        (
            ["streams", "create", "x", "--start", "now", "--end", "now-1h"],
            "--end (end_ms)",
        ),
        (["streams", "create", "x", "--start", "now", "--gc-grace", "0s"], "--gc-grace"),
        (["streams", "update", "x", "--bypass-retention", "x"], "--bypass-retention"),
        (["replay", "x", "--from", "now", "--to", "now-1h"], "--to"),
        (["replay", "x", "--from", "then", "--to", "now"], "--from"),
    ],
)
def test_bad_input_names_the_flag_and_exits_2(args: list[str], flag: str) -> None:
    result = CliRunner().invoke(app, ["--bootstrap-servers", "127.0.0.1:1", *args])

    assert result.exit_code == 2, result.output
    assert f"error: {flag}" in result.stderr


def test_a_bad_topic_or_option_is_a_usage_error() -> None:
    assert CliRunner().invoke(app, ["tail", "everything"]).exit_code == 2
    assert CliRunner().invoke(app, ["streams", "list", "--output", "yaml"]).exit_code == 2


def test_every_command_has_help() -> None:
    for args in (
        [],
        ["streams"],
        *[["streams", c] for c in ("create", "update", "pause", "resume", "delete", "list")],
        ["streams", "show"],
        ["replay"],
        ["tail"],
        ["topics"],
        ["topics", "create"],
        ["status"],
        ["coordinator"],
    ):
        result = CliRunner().invoke(app, [*args, "--help"])
        assert result.exit_code == 0, (args, result.output)
        assert "Usage:" in result.stdout


# -- an unreachable broker: a clear error within 10 s, exit 1 ----------------------------------


def test_an_unreachable_broker_is_reported_within_10_s() -> None:
    down = f"127.0.0.1:{free_port()}"
    began = time.monotonic()
    result = CliRunner().invoke(app, ["streams", "list", "--bootstrap-servers", down])

    assert time.monotonic() - began < 10
    assert result.exit_code == 1
    assert f"error: no Kafka broker answered at {down}" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["streams", "create", "x", "--start", "now"],
        ["streams", "update", "x", "--window", "2m"],
        ["streams", "pause", "x"],
        ["streams", "resume", "x"],
        ["streams", "delete", "x", "--yes"],
        ["streams", "show", "x"],
        ["replay", "x", "--from", "now-1h", "--to", "now"],
        ["tail", "commits"],
        ["topics", "create"],
        ["status"],
        ["status", "--output", "json"],
    ],
)
def test_every_kafka_command_fails_cleanly_on_a_broker_that_is_down(args: list[str]) -> None:
    down = f"127.0.0.1:{free_port()}"
    env = {"TIDEMARK_CONNECT_TIMEOUT_S": "0.5"}  # the default (6 s) is tested above
    result = CliRunner().invoke(app, ["--bootstrap-servers", down, *args], env=env)

    assert result.exit_code == 1, result.output
    assert f"no Kafka broker answered at {down}" in result.stderr
    if args == ["status"]:
        assert "broker: unreachable" in result.stdout
    elif args[0] == "status":
        assert json.loads(result.stdout)["broker"]["reachable"] is False


# -- topics ------------------------------------------------------------------------------------


def test_topics_create_makes_every_topic_once(kafka: KafkaSettings, unique: str) -> None:
    cli = Cli(kafka, f"topics-{unique}")
    topics = Topics(cli.prefix)

    first = cli.json("topics", "create", "--partitions", "2")
    assert sorted(first["created"]) == sorted(s.name for s in topics.specs(2, 1))
    partitions = dict(first["partitions"])
    assert partitions.pop(topics.health) == 1  # read whole by every coordinator
    assert partitions.pop(topics.sources) == 1  # each source's limits, read whole
    assert partitions.pop(topics.pipelines) == 1  # the registry, read whole
    assert set(partitions.values()) == {2}

    again = cli.ok("topics", "create", "--partitions", "3")
    assert again.count("already existed") == len(first["created"])
    assert cli("topics", "create", "--partitions", "3").stderr.startswith("note:")


def test_commands_that_need_topics_say_how_to_create_them(kafka: KafkaSettings) -> None:
    cli = Cli(kafka, f"none-{uuid.uuid4().hex[:6]}")
    result = cli("streams", "create", "x", "--start", "now")

    assert result.exit_code == 1
    assert "does not exist" in result.stderr and "tidemark topics create" in result.stderr
    assert "tidemark topics create" in cli.ok("status")
    assert cli.json("status")["topics_exist"] is False
    assert "no streams" in cli.ok("streams", "list")


# -- streams, on a real coordinator -----------------------------------------------------------


def test_create_then_list_and_show_follow_real_commits(cli: Cli) -> None:
    s = sid()
    created = cli.ok("streams", "create", s, "--start", "now-1m", "--window", "10s", "--step", "5s")
    assert f"created stream '{s}': windows of 10s every 5s" in created

    def caught_up() -> Any:
        doc = cli.shown(s)
        return doc if doc and doc["state"] == "live" and doc["downstream_ms"] > doc["config"][
            "start_ms"] else None  # fmt: skip

    shown = wait_for("the stream to catch up", caught_up)
    assert shown["lag_ms"] < 2 * 10_000
    assert shown["last_commit_ms"] >= shown["downstream_ms"]
    assert shown["config"]["window_ms"] == 10_000 and shown["bypassed"] == []
    assert shown["window"][1] - shown["window"][0] == 10_000

    listed = {doc["stream_id"]: doc for doc in cli.json("streams", "list")}
    assert listed[s]["downstream_ms"] >= shown["downstream_ms"]
    table = cli.ok("streams", "list")
    assert s in table and "live" in table and "downstream (UTC)" in table
    assert s in {doc["stream_id"] for doc in cli.json("streams", "list", "--state", "live")}
    assert s not in cli.ok("streams", "list", "--state", "paused")
    assert "window" in cli.ok("streams", "show", s)

    again = cli("streams", "create", s, "--start", "now")
    assert again.exit_code == 1 and "already exists" in again.stderr


def test_a_failing_stream_shows_retries_bypasses_and_how_to_replay(cli: Cli) -> None:
    s = sid("fail")
    cli.ok(
        "streams", "create", s, "--start", "now-30s", "--window", "10s", "--step", "10s",
        "--retry", "fixed:200ms", "--max-attempts", "2", "--non-retryable", "fatal,bad_params",
    )  # fmt: skip
    try:
        doc = wait_for("a bypass", lambda: (d := cli.shown(s)) and d["bypassed"] and d)
        assert doc["config"]["non_retryable"] == ["bad_params", "fatal"]
        bypassed = doc["bypassed"][0]
        assert bypassed["attempts"] == 2
        assert bypassed["last_error"] == {"kind": "no_data", "message": "nothing for this window"}
        assert bypassed["replay_command"].startswith(f"tidemark replay {s} --from 20")

        text = cli.ok("streams", "show", s)
        assert "bypassed windows" in text and "tidemark replay" in text and "--retry" in text

        status = cli.json("status")
        assert status["broker"]["reachable"] and status["streams"] >= 1
        assert any(b["stream_id"] == s for b in status["bypasses"])
        assert sum(status["states"].values()) == status["streams"]
        assert status["outages"] == []  # one failing stream on no source is no outage
        summary = cli.ok("status")
        assert "reachable" in summary and "recent bypasses" in summary and s in summary

        start, end = bypassed["start_ms"], bypassed["end_ms"]
        replay = cli("replay", s, "--from", str(start), "--to", str(end), "--timeout", "30")
        assert replay.exit_code == 0, replay.output
        assert f"replayed 1 of 1 windows of '{s}'" in replay.stdout
        after = cli.json("streams", "show", s)
        assert start not in [b["start_ms"] for b in after["bypassed"]]
        assert after["downstream_ms"] >= doc["downstream_ms"]
    finally:
        cli.ok("streams", "delete", s, "--yes")


def test_update_pause_resume_and_delete(cli: Cli) -> None:
    s = sid()
    start = now_ms() + 10 * MIN  # nothing is due: only the control topic changes
    cli.ok("streams", "create", s, "--start", str(start), "--param", "region=eu")
    wait_for("the stream's view", lambda: cli.shown(s))

    cli.ok("streams", "update", s, "--window", "2m", "--step", "30s", "--param", "limit=5")
    config = wait_for("the update", lambda: (c := cli.shown(s)["config"])["window_ms"] == 120_000
                      and c)  # fmt: skip
    assert (config["window_ms"], config["step_ms"], config["start_ms"]) == (120_000, 30_000, start)
    assert config["params"] == {"region": "eu", "limit": 5}
    assert config["retry"] == {"strategy": "fixed", "interval_ms": 60_000}

    sent = cli.json("streams", "update", s, "--params-json", '{"x": 1}', "--retry", "immediate")
    assert sent["sent"]["params"] == {"x": 1} and sent["sent"]["window_ms"] == 120_000

    cli.ok("streams", "pause", s)
    shown = wait_for("the pause", lambda: (d := cli.shown(s))["paused"] and d)
    assert shown["state"] == "paused" and shown["config"]["retry"] == {"strategy": "immediate"}
    cli.ok("streams", "resume", s)
    wait_for("the resume", lambda: not cli.shown(s)["paused"])

    kept = cli("streams", "delete", s, input="n\n")
    assert kept.exit_code == 1 and cli.json("streams", "show", s)
    assert "pass --yes to delete without asking" in kept.stderr
    unasked = cli("streams", "delete", s)  # no terminal: stdin is empty
    assert unasked.exit_code == 1 and cli.json("streams", "show", s)
    assert "Aborted!" not in unasked.output
    assert f"error: stream {s!r} not deleted: no answer to the question; " in unasked.stderr
    assert "pass --yes to delete without asking" in unasked.stderr
    assert "deleted" in cli.ok("streams", "delete", s, "--yes")
    wait_for("the delete", lambda: s not in {d["stream_id"] for d in cli.json("streams", "list")})


def test_create_paused_dispatches_nothing_until_resumed(cli: Cli) -> None:
    """A stream created --paused, whose windows are due, shows as paused and gets no task until
    it is resumed; then its windows go out and commit (the Cli's coordinator and responder)."""
    s = sid()
    sent = cli.json("streams", "create", s, "--start", "now-3m", "--window", "1m", "--paused")
    assert sent["sent"]["paused"] is True
    shown = wait_for("the stream's view", lambda: cli.shown(s))
    assert shown["paused"] and shown["state"] == "paused"
    time.sleep(2)  # ticks come every second: a paused stream dispatches nothing meanwhile
    still = cli.shown(s)
    assert still["attempt"] == 0 and still["downstream_ms"] == shown["downstream_ms"]
    cli.ok("streams", "resume", s)
    before_ms = shown["downstream_ms"]
    wait_for("its windows to commit", lambda: cli.shown(s)["downstream_ms"] > before_ms)


def test_a_stream_of_a_pipeline_makes_its_topic_and_shows_its_pipeline(cli: Cli) -> None:
    s = sid("piped")
    start = now_ms() + 10 * MIN  # nothing is due: the topic comes from the CLI, not a task
    topic = f"{cli.prefix}.tasks.cli-logs"
    created = cli.ok("streams", "create", s, "--start", str(start), "--pipeline", "cli-logs")
    assert "for the workers of pipeline 'cli-logs'" in created
    counts = partition_counts(cli.kafka, [topic, f"{cli.prefix}.tasks"])
    assert counts[topic] == counts[f"{cli.prefix}.tasks"]  # made like the default one
    shown = wait_for("the stream's view", lambda: cli.shown(s))
    assert shown["pipeline"] == "cli-logs" and shown["config"]["pipeline"] == "cli-logs"
    assert "cli-logs" in cli.ok("streams", "list") and "--pipeline" in cli.ok("streams", "show", s)
    cli.ok("streams", "delete", s, "--yes")


@pytest.mark.parametrize(
    "args",
    [
        ["streams", "show"],
        ["streams", "update", "--window", "2m"],
        ["streams", "pause"],
        ["streams", "resume"],
        ["streams", "delete", "--yes"],
    ],
)
def test_an_unknown_stream_is_an_error(cli: Cli, args: list[str]) -> None:
    result = cli(*args[:2], "no-such-stream", *args[2:])

    assert result.exit_code == 1
    assert "error: unknown stream 'no-such-stream'" in result.stderr


# -- replay: the CLI's side, with the test as the coordinator ----------------------------------


class FakeCoordinator:
    """Waits for the replay request on `control`, then writes the outcomes a coordinator would."""

    def __init__(self, cli: Cli, outcomes: Callable[[dict[str, Any]], list[tuple]]) -> None:
        self.cli, self.outcomes = cli, outcomes
        self.requests: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._run, name="fake-coordinator")

    def __enter__(self) -> FakeCoordinator:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.thread.join(40)

    def _run(self) -> None:
        tail = Tail(self.cli.kafka, self.cli.prefix, ["control"], f"fake-{uuid.uuid4().hex}")
        producer = Producer(self.cli.kafka.producer())
        try:
            deadline = time.monotonic() + 30
            while not self.requests and time.monotonic() < deadline:
                tail.poll()
                self.requests = [v for v in tail.values("control") if v["type"] == "replay"]
            for topic, key, value in self.outcomes(self.requests[0]) if self.requests else []:
                raw = None if value is None else json.dumps(value).encode()
                producer.produce(f"{self.cli.prefix}.{topic}", raw, key.encode())
            assert producer.flush(60) == 0, "records left unsent after 60 s"
        finally:
            tail.close()


def bypassed(s: str, start: int, attempts: int = 3) -> dict[str, Any]:
    return {
        "stream_id": s,
        "start_ms": start,
        "end_ms": start + MIN,
        "attempts": attempts,
        "first_failed_ms": start + MIN,
        "bypassed_ms": start + 5 * MIN,
        "last_error": {"kind": "timeout", "message": f"attempt {attempts} timed out"},
    }


def replayed_commit(s: str, start: int) -> dict[str, Any]:
    return {
        "stream_id": s,
        "downstream_ms": start + 30 * MIN,
        "previous_ms": start + 30 * MIN,
        "committed_ms": now_ms(),
        "windows": [
            {"start_ms": start, "end_ms": start + MIN, "reason": "replayed", "attempts": 4}
        ],
    }


def seed_bypasses(cli: Cli, s: str, starts: list[int]) -> None:
    """The stream's view and its bypassed windows, as a coordinator publishes them."""
    producer = Producer(cli.kafka.producer())
    state = create_state(StreamConfig(s, starts[0]), now_ms()).state
    assert state is not None
    view = encode_view(view_of(state, len(starts), None, now_ms()))
    producer.produce(f"{cli.prefix}.streams", view, s.encode())
    for start in starts:
        value = json.dumps(bypassed(s, start)).encode()
        producer.produce(f"{cli.prefix}.bypassed", value, f"{s}/{start}".encode())
    # Topics just made may take a while to take writes on a loaded machine: a CI run's replay
    # tests found nothing after a 10 s flush that had left 2 records unsent.
    assert producer.flush(60) == 0, "records left unsent after 60 s"


T0 = 1_795_946_400_000  # 2026-11-29T10:00:00Z


def test_replay_shows_progress_until_every_window_is_replayed(bare: Cli) -> None:
    s = sid()
    seed_bypasses(bare, s, [T0, T0 + MIN, T0 + 5 * MIN])

    def outcomes(request: dict[str, Any]) -> list[tuple]:
        assert (request["from_ms"], request["to_ms"]) == (T0, T0 + 2 * MIN)
        return [
            ("bypassed", f"{s}/{T0}", None),  # unlisted ...
            ("commits", s, replayed_commit(s, T0)),  # ... and announced
            ("commits", s, replayed_commit(s, T0 + MIN)),  # announced, tombstone still to come
        ]

    with FakeCoordinator(bare, outcomes) as fake:
        result = bare("replay", s, "--from", "2026-11-29T10:00:00Z", "--to", "2026-11-29T10:02:00Z")

    assert fake.requests and fake.requests[0]["stream_id"] == s
    assert result.exit_code == 0, result.output
    assert f"replayed 2 of 2 windows of '{s}'" in result.stdout
    assert "replaying" in result.stderr  # the progress bar


def test_replay_reports_windows_that_failed_again(bare: Cli) -> None:
    s = sid()
    seed_bypasses(bare, s, [T0, T0 + MIN])

    def outcomes(request: dict[str, Any]) -> list[tuple]:
        return [
            ("bypassed", f"{s}/{T0}", None),
            ("bypassed", f"{s}/{T0 + MIN}", bypassed(s, T0 + MIN, attempts=4)),  # relisted
        ]

    with FakeCoordinator(bare, outcomes):
        result = bare("replay", s, "--from", str(T0), "--to", str(T0 + 2 * MIN), "-o", "json")

    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert [w["start_ms"] for w in doc["replayed"]] == [T0]
    assert [(w["start_ms"], w["attempts"]) for w in doc["failed"]] == [(T0 + MIN, 4)]
    assert doc["pending"] == []
    assert (
        f"next: see why with `tidemark streams show {s}`; once the cause is fixed, replay them "
        f"again with `tidemark replay {s} --from 2026-11-29T10:01:00Z --to 2026-11-29T10:02:00Z`"
    ) in result.stderr


def test_replay_the_coordinator_rejects_is_reported_at_once(bare: Cli) -> None:
    """The read model lists a window the coordinator has no replay record of (it rejects the
    request, on `rejected`): waiting for outcomes that never come would show a bar forever."""
    s = sid()
    seed_bypasses(bare, s, [T0])
    reason = f"no bypassed window of {s!r} is listed"

    def outcomes(request: dict[str, Any]) -> list[tuple]:
        rejection = {
            "source_topic": f"{bare.prefix}.control",
            "partition": 0,
            "offset": 7,
            "reason": reason,
            "key": s,
            "value": json.dumps(request),
        }
        return [("rejected", s, rejection)]

    started = time.monotonic()
    with FakeCoordinator(bare, outcomes):
        result = bare("replay", s, "--from", str(T0), "--to", str(T0 + MIN), "--timeout", "60")

    assert result.exit_code == 1, result.output
    assert time.monotonic() - started < 30
    assert f"the coordinator rejected the replay: {reason}; see what is listed" in result.stderr


def test_replay_without_waiting_nothing_to_replay_and_unknown_streams(bare: Cli) -> None:
    s = sid()
    seed_bypasses(bare, s, [T0])

    sent = bare.json("replay", s, "--from", str(T0), "--to", str(T0 + MIN), "--no-wait")
    assert sent["requested"] and sent["type"] == "replay" and len(sent["windows"]) == 1
    tail = Tail(bare.kafka, bare.prefix, ["control"], f"check-{uuid.uuid4().hex}")
    try:
        tail.wait_for("the replay request", lambda: tail.values("control")[-1:])
        assert tail.values("control")[-1] == {
            "type": "replay", "stream_id": s, "from_ms": T0, "to_ms": T0 + MIN,
        }  # fmt: skip
    finally:
        tail.close()

    nothing = bare.ok("replay", s, "--from", str(T0 + MIN), "--to", str(T0 + 2 * MIN))
    assert "nothing to replay" in nothing
    unknown = bare("replay", "ghost", "--from", str(T0), "--to", str(T0 + MIN))
    assert unknown.exit_code == 1 and "unknown stream 'ghost'" in unknown.stderr


def test_replay_gives_up_waiting_after_its_timeout(bare: Cli) -> None:
    s = sid()
    seed_bypasses(bare, s, [T0])

    result = bare("replay", s, "--from", str(T0), "--to", str(T0 + MIN), "--timeout", "1")

    assert result.exit_code == 1
    assert "replayed 0 of 1" in result.stdout and "no outcome yet" in result.stdout
    assert f"follow it with `tidemark streams show {s}`" in result.stderr


# -- tail --------------------------------------------------------------------------------------


def produce(cli: Cli, topic: str, key: str, value: Any) -> None:
    producer = Producer(cli.kafka.producer())
    raw = None if value is None else json.dumps(value).encode()
    producer.produce(f"{cli.prefix}.{topic}", raw, key.encode())
    # Delivered, or the test says so (a record left in the queue made the tail below wait for
    # good: topics just made, at load, took their leaders late).
    assert producer.flush(30) == 0, f"a record to {topic} was not delivered within 30 s"


def test_tail_prints_records_from_the_beginning(bare: Cli) -> None:
    produce(bare, "bypassed", f"s/{T0}", bypassed("s", T0))
    produce(bare, "bypassed", f"s/{T0}", None)

    # --timeout: a record missing fails the test instead of waiting for ever.
    lines = bare.ok(
        "tail", "bypassed", "--from-beginning", "--max", "2", "--timeout", "30", "-o", "json"
    )
    records = [json.loads(line) for line in lines.splitlines()]
    assert [r["value"] for r in records] == [bypassed("s", T0), None]
    assert {r["key"] for r in records} == {f"s/{T0}"} and records[0]["topic"] == "bypassed"

    text = bare.ok("tail", "bypassed", "--from-beginning", "--max", "2", "--timeout", "30")
    assert f"s/{T0} " in text and "(tombstone)" in text
    assert '"start_ms":"2026-11-29T10:00:00Z","end_ms":"2026-11-29T10:01:00Z"' in text
    assert f'"start_ms":{T0}' not in text  # raw milliseconds only with --output json
    assert bare.ok("tail", "rejected", "--timeout", "0.5") == ""


def test_tail_follows_new_records_until_ctrl_c(bare: Cli) -> None:
    command = [sys.executable, "-m", "streams", "tail", "commits", "--output", "json"]
    proc = subprocess.Popen(
        command,
        env={**os.environ, **bare.env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert proc.stderr is not None and proc.stdout is not None
        assert ready(proc.stderr, 20), "tail did not start"
        produce(bare, "commits", "s", replayed_commit("s", T0))
        assert ready(proc.stdout, 20), "tail printed nothing"
        record = json.loads(proc.stdout.readline())
        assert record["value"]["windows"][0]["reason"] == "replayed"

        proc.send_signal(signal.SIGINT)
        assert proc.wait(5) == 0
        assert b"Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def ready(stream: Any, timeout_s: float) -> bool:
    return bool(select.select([stream], [], [], timeout_s)[0])


# -- worker: passed through to the worker's own command line ----------------------------------


def test_worker_passes_its_arguments_through(bare: Cli) -> None:
    helped = subprocess.run(
        [sys.executable, "-m", "streams", "worker", "--help"],
        capture_output=True,
        timeout=30,
    )
    assert helped.returncode == 0 and b"--pipeline" in helped.stdout

    command = [sys.executable, "-m", "streams", "worker", "--pipeline", "synthetic"]
    proc = subprocess.Popen(
        [*command, "--concurrency", "1", "--prefix", bare.prefix, "--log-level", "WARNING"],
        env={**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bare.kafka.bootstrap_servers},
        stdin=subprocess.DEVNULL,
    )
    tail = Tail(bare.kafka, bare.prefix, ["results"], f"results-{uuid.uuid4().hex}")
    try:
        end = now_ms() - 1_000
        task = {
            "task_id": f"w/{end}/1", "stream_id": "w", "start_ms": end - MIN, "end_ms": end,
            "step_ms": 15_000, "attempt": 1, "dispatched_ms": end, "deadline_ms": end + 60_000,
            "params": {},
        }  # fmt: skip
        produce(bare, "tasks", "w", task)
        result = tail.wait_for("the worker's ack", lambda: tail.values("results", "w"))[0]
        assert (result["outcome"], result["ack_ms"]) == ("ack", end)
    finally:
        tail.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
