"""A worker's registry announcer: its entry at start and every interval, a tombstone at a clean
stop, nothing at an unclean one, and a broker that refuses never stops the worker."""

from __future__ import annotations

import threading

from pydantic import BaseModel

from streams.errors import BrokerUnavailable
from streams.handler import Ack, Outcome, Task
from streams.registry import is_live, pipelines
from streams.wire.pipelines import decode_pipeline
from streams.worker.config import WorkerConfig
from streams.worker.registry import Announcement, RegistryAnnouncer


class Params(BaseModel):
    path: str


class Handler:
    params_model = Params
    version = "3.1"

    def __call__(self, task: Task, params: Params) -> Outcome:
        return Ack(task.end_ms)


CONFIG = WorkerConfig("mine:Handler", topic_prefix="tm", route="logs", instance_id="w-1")


def test_the_announcement_names_route_handler_version_schema_identity_and_group() -> None:
    entry = Announcement.of(CONFIG, Handler()).entry(5_000)
    assert (entry.route, entry.handler, entry.version) == ("logs", "mine:Handler", "3.1")
    assert entry.params_schema == Params.model_json_schema()
    assert (entry.worker, entry.group, entry.published_ms) == ("w-1", "tm-workers-logs", 5_000)


def test_it_announces_at_start_and_every_interval_and_withdraws_at_a_clean_stop() -> None:
    sent: list[tuple[bytes, bytes | None]] = []
    three = threading.Event()

    def publish(key: bytes, value: bytes | None) -> None:
        sent.append((key, value))
        if len(sent) >= 3:
            three.set()

    announcement = Announcement.of(CONFIG, Handler(), interval_ms=10)
    announcer = RegistryAnnouncer(announcement, publish, now_ms=lambda: 7_000)
    announcer.start()
    assert three.wait(5)
    announcer.stop(clean=True)
    assert all(key == b"logs/w-1" for key, _ in sent)
    *entries, last = sent
    assert last[1] is None  # the tombstone
    decoded = [decode_pipeline(k, v) for k, v in entries]
    assert all(e is not None and is_live(e, 7_000) for e in decoded)
    live = pipelines([e for e in decoded if e is not None], 7_000)["logs"].live
    assert {e.worker for e in live} == {"w-1"}


def test_an_unclean_stop_leaves_the_entry_to_go_stale() -> None:
    sent: list[bytes | None] = []
    announcer = RegistryAnnouncer(
        Announcement.of(CONFIG, Handler(), interval_ms=60_000), lambda k, v: sent.append(v)
    )
    announcer.start()
    announcer.stop(clean=False)
    assert len(sent) == 1 and sent[0] is not None


def test_a_publish_the_broker_refuses_is_logged_and_retried_not_raised() -> None:
    def refuse(key: bytes, value: bytes | None) -> None:
        raise BrokerUnavailable("down")

    announcer = RegistryAnnouncer(Announcement.of(CONFIG, Handler()), refuse)
    assert announcer.announce() is False
    announcer.stop(clean=True)  # the tombstone fails too: logged
    assert announcer.published == 0
