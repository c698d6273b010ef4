"""The read side's one stream view and one bypass view, rendered to JSON once: the CLI's
`--output json` and the status page's API show a stream (and a bypassed window) alike."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import streams.readmodel as readmodel
from streams.commands.views import bypass_doc, stream_doc
from streams.core import StreamConfig
from streams.core.view import PublishedView
from streams.dashboard.state import Snapshot, state_document
from streams.dashboard.table import StreamTable
from streams.kafka.settings import KafkaSettings
from streams.readmodel import BypassView, ReadModel
from streams.readview import ReadView
from streams.wire import decode_view, encode_view
from tests.test_readmodel import MIN, T0, bypass, put, view

NOW = T0 + 10 * MIN


@pytest.fixture
def model() -> Iterator[ReadModel]:
    rm = ReadModel(KafkaSettings("127.0.0.1:1"), "tm")
    put(rm, "streams", view("s", status="retrying", last_error={"kind": "k", "message": "m"}))
    put(rm, "streams", view("t", downstream_ms=T0 - 60 * MIN))
    put(rm, "bypassed", bypass(T0, "s"), key=f"s/{T0}")
    yield rm
    rm.close()


def test_the_two_stream_views_have_names_of_their_own() -> None:
    assert PublishedView.__module__ == "streams.core.view"
    assert not hasattr(readmodel, "StreamView") and not hasattr(readmodel, "BriefView")


def test_every_read_of_the_model_hands_the_one_stream_view(model: ReadModel) -> None:
    changed, removed = model.changes()
    assert removed == []
    assert {type(v) for v in [*model.streams(), model.stream("s"), *changed]} == {ReadView}
    assert {type(b) for b in [*model.bypasses(), *model.bypasses_of("s")]} == {BypassView}


def test_the_status_page_table_keeps_the_views_it_is_given(model: ReadModel) -> None:
    table = StreamTable()
    Snapshot.read(model, table, NOW)
    rows = table.page(NOW, "stream_id", descending=False).rows
    assert [type(row) for row in rows] == [ReadView, ReadView]


def test_the_cli_and_the_status_page_render_a_stream_alike(model: ReadModel) -> None:
    api = state_document(Snapshot.read(model, StreamTable(), NOW), NOW)
    by_id = {doc["stream_id"]: doc for doc in api["streams"]}
    for shown in model.streams():
        cli = stream_doc(shown, NOW, config=False)
        page = by_id[shown.stream_id]
        # The one difference, kept for the CLI's users: its window is a [start, end] pair.
        window = page.pop("window")
        assert cli.pop("window") == [window["start_ms"], window["end_ms"]]
        assert cli == page
    assert by_id["s"]["state"] == "retrying" and by_id["t"]["state"] == "catching up"


def test_the_cli_and_the_status_page_render_a_bypass_alike(model: ReadModel) -> None:
    api = state_document(Snapshot.read(model, StreamTable(), NOW), NOW)
    (listed,) = model.bypasses()
    assert api["bypasses"] == [bypass_doc(listed)]
    assert bypass_doc(listed)["replay_command"].startswith("tidemark replay s ")


def test_the_config_is_rendered_only_when_asked_and_is_a_copy(model: ReadModel) -> None:
    shown = model.stream("s")
    assert shown is not None
    doc = stream_doc(shown, NOW)
    assert doc["config"]["window_ms"] == 60_000
    doc["config"]["params"]["changed"] = True
    assert "changed" not in stream_doc(shown, NOW)["config"]["params"]
    assert "config" not in stream_doc(shown, NOW, config=False)


def test_a_views_pipeline_reaches_the_page_and_the_cli_without_its_config() -> None:
    published = PublishedView(StreamConfig("s", T0, pipeline="logs"), "live", T0, None, 0,
                              None, 0, None, 1, T0)  # fmt: skip
    decoded = decode_view(b"s", encode_view(published)).view
    assert decoded is not None
    page_row = ReadView.of(decoded, 0, config=False)  # the page holds no config
    assert page_row.pipeline == "logs" and page_row.stream_config is None
    assert page_row.to_json(NOW)["pipeline"] == "logs"
    assert ReadView.copy_of(page_row, NOW).pipeline == "logs"
    plain = PublishedView(StreamConfig("s", T0), "live", T0, None, 0, None, 0, None, 1, T0)
    assert ReadView.of(plain, 0).to_json(NOW)["pipeline"] == "default"
