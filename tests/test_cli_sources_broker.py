"""`tidemark sources set|list|show|delete` end to end: a real coordinator applies them to the
`sources` view; without one `set` says it was not applied, and a coordinator's rejection (an
older one, which knows no `source_set`) is reported."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from typer.testing import CliRunner, Result

from streams.cli import app
from streams.commands.source_cmds import APPLY_WAIT_S
from streams.coordinator.limits_table import limits_table
from streams.coordinator.settings import CoordinatorSettings
from streams.core.admission import SourceLimits
from streams.kafka.admin import create_topics
from streams.kafka.partitioner import partition_of
from streams.kafka.settings import KafkaSettings
from streams.topics import Topics
from streams.wire import encode_source_view, rejected_value, source_control_key, source_view_key
from tests.support.coordinator import CoordinatorProcess

pytestmark = pytest.mark.broker


@dataclass(frozen=True)
class Cli:
    kafka: KafkaSettings
    prefix: str

    def __call__(self, *args: str) -> Result:
        env = {
            "KAFKA_BOOTSTRAP_SERVERS": self.kafka.bootstrap_servers,
            "TIDEMARK_TOPIC_PREFIX": self.prefix,
            "COLUMNS": "250",
        }
        return CliRunner().invoke(app, list(args), env=env)

    def ok(self, *args: str) -> str:
        result = self(*args)
        assert result.exit_code == 0, result.output
        return result.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--output", "json"))


@pytest.fixture(params=["confluent", "faust"])
def coordinated(
    request: pytest.FixtureRequest, kafka: KafkaSettings, unique: str, tmp_path: Path
) -> Iterator[tuple[Cli, CoordinatorProcess]]:
    """A coordinator of each engine, on its own topics."""
    prefix = f"sources-{unique}"
    engine = request.param
    coordinator = CoordinatorProcess(
        kafka, prefix, tmp_path / "data", tmp_path / "log", flush_ms=100, engine=engine
    )
    coordinator.start().wait_ready()
    try:
        yield Cli(kafka, prefix), coordinator
    finally:
        coordinator.stop()


def test_set_list_show_and_delete_on_a_real_coordinator(
    coordinated: tuple[Cli, CoordinatorProcess],
) -> None:
    live, coordinator = coordinated
    source = f"thanos-{uuid.uuid4().hex[:6]}"
    assert "every source is unlimited" in live.ok("sources", "list")

    began = time.time_ns() // 1_000_000
    out = live.ok("sources", "set", source, "--max-in-flight", "20")
    assert out.startswith(f"set the limits of source {source!r}: max_in_flight 20, ")
    # `set` starts from the current limits: the cap set before stays
    sent = live.json("sources", "set", source, "--rate-per-s", "5")
    assert sent["applied"] is True and sent["sent"]["type"] == "source_set"
    shown = live.json("sources", "show", source)
    assert shown.pop("updated_ms") >= began
    assert shown == {
        "source": source, "max_in_flight": 20, "rate_per_s": 5.0, "burst": 5,
        "backfill_share": 0.2, "pace_start": 4,
    }  # fmt: skip
    assert [doc["source"] for doc in live.json("sources", "list")] == [source]
    table = live.ok("sources", "list")
    assert source in table and "max in flight" in table

    # a bad value is refused before it is sent, naming the flag; nothing changes
    bad = live("sources", "set", source, "--max-in-flight", "0")
    assert bad.exit_code == 2
    assert bad.stderr.strip() == "error: --max-in-flight (max_in_flight): must be >= 1, got 0"
    bad = live("sources", "set", source, "--rate-per-s", "none", "--burst", "3")
    assert bad.exit_code == 2
    assert "error: --burst (burst): is only allowed with rate_per_s" in bad.stderr
    assert live.json("sources", "show", source)["max_in_flight"] == 20

    # none unsets; the burst goes with the rate
    live.ok("sources", "set", source, "--max-in-flight", "none", "--rate-per-s", "none")
    shown = live.json("sources", "show", source)
    assert (shown["max_in_flight"], shown["rate_per_s"], shown["burst"]) == (None, None, None)

    assert "deleted the limits" in live.ok("sources", "delete", source, "--yes")
    gone = live("sources", "show", source)
    assert gone.exit_code == 1 and "has no limits (it is unlimited)" in gone.stderr
    again = live("sources", "delete", source, "--yes")
    assert again.exit_code == 1 and "has no limits" in again.stderr
    assert "every source is unlimited" in live.ok("sources", "list")
    stats = (coordinator.health() or {}).get("stats", {})
    assert (stats.get("source_sets"), stats.get("source_deletes")) == (3, 1)


def test_the_engines_reader_follows_the_view(bare: Cli) -> None:
    """What both engines pass the Processor: the latest limits per source, from `sources`."""
    settings = CoordinatorSettings(kafka=bare.kafka, topics=Topics(bare.prefix))
    table, latest = limits_table(settings)
    producer = Producer(bare.kafka.producer())
    topic = settings.topics.sources
    first, second = SourceLimits("a", max_in_flight=3), SourceLimits("b", rate_per_s=2.0)
    for limits in (first, second):
        producer.produce(topic, encode_source_view(limits, 1), source_view_key(limits.source))
    assert producer.flush(60) == 0, "records left unsent after 60 s"
    table.start()
    try:
        wait_for("both sources", lambda: latest() == {"a": first, "b": second})
        producer.produce(topic, None, source_view_key("a"))  # deleted
        producer.produce(topic, b"{not json", source_view_key("c"))  # skipped, logged
        assert producer.flush(60) == 0, "records left unsent after 60 s"
        wait_for("a's tombstone", lambda: latest() == {"b": second})
        assert table.caught_up()
    finally:
        table.stop()


def wait_for(what: str, check: Callable[[], bool], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.fixture
def bare(kafka: KafkaSettings, unique: str) -> Cli:
    """Fresh topics with no coordinator."""
    prefix = f"bare-sources-{unique}"
    create_topics(kafka, Topics(prefix).specs(partitions=2, replication=1))
    return Cli(kafka, prefix)


def test_set_without_a_coordinator_says_it_was_not_applied(bare: Cli) -> None:
    began = time.monotonic()
    result = bare("sources", "set", "thanos", "--max-in-flight", "3")

    assert result.exit_code == 1
    assert time.monotonic() - began >= APPLY_WAIT_S
    assert f"no coordinator applied it within {APPLY_WAIT_S:g} s" in result.stderr
    assert "every source is unlimited" in bare.ok("sources", "list")
    # what was sent: keyed by the source's own key, in the partition murmur2 gives it
    ((key, partition, value),) = read_control(bare)
    assert key == source_control_key("thanos")
    assert partition == partition_of(key, 2)
    assert json.loads(value) == {
        "type": "source_set", "source": "thanos", "max_in_flight": 3, "rate_per_s": None,
        "burst": None, "backfill_share": 0.2, "pace_start": 4,
    }  # fmt: skip


def read_control(cli: Cli) -> list[tuple[bytes, int, bytes]]:
    """Every record on `control` so far: key, partition, value."""
    group = {"group.id": f"look-{uuid.uuid4().hex}", "auto.offset.reset": "earliest"}
    consumer = Consumer(cli.kafka.consumer(**group))
    consumer.subscribe([Topics(cli.prefix).control])
    found: list[tuple[bytes, int, bytes]] = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not found:
            for msg in consumer.consume(100, 1.0):
                if msg.error() is None:
                    found.append((msg.key(), msg.partition(), msg.value()))
    finally:
        consumer.close()
    return found


class RejectingCoordinator:
    """Plays a coordinator that knows no `source_set`: rejects the first control it reads."""

    def __init__(self, cli: Cli) -> None:
        self.cli = cli
        self.thread = threading.Thread(target=self._run, name="rejecting-coordinator")

    def __enter__(self) -> RejectingCoordinator:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.thread.join(40)

    def _run(self) -> None:
        topics = Topics(self.cli.prefix)
        group = {"group.id": f"reject-{uuid.uuid4().hex}", "auto.offset.reset": "earliest"}
        consumer = Consumer(self.cli.kafka.consumer(**group))
        consumer.subscribe([topics.control])
        producer = Producer(self.cli.kafka.producer())
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is None or msg.error() is not None:
                    continue
                reason = "type: is not valid; one of upsert, pause, resume, delete, replay"
                at = (msg.topic(), msg.partition(), msg.offset())
                value = rejected_value(*at, reason, msg.key(), msg.value())
                producer.produce(topics.rejected, value, msg.key())
                assert producer.flush(60) == 0, "records left unsent after 60 s"
                return
        finally:
            consumer.close()


def test_a_coordinator_that_rejects_it_is_reported(bare: Cli) -> None:
    with RejectingCoordinator(bare):
        result = bare("sources", "set", "thanos", "--max-in-flight", "3")

    assert result.exit_code == 1, result.output
    assert "error: a coordinator rejected it: type: is not valid" in result.stderr
