import json
from typing import Any

import pytest

from streams.core import (
    Exponential,
    Pause,
    StreamConfig,
    StreamState,
    advance,
    apply_control,
    apply_result,
    state_from_dict,
    state_from_row,
    state_from_stored,
    state_to_dict,
    state_to_row,
)
from streams.core.codec import STORED_CONFIG_DEFAULTS, config_from_stored, config_to_stored
from streams.core.config import config_to_dict
from streams.errors import InvalidInput

from .helpers import ack, at, nack, only, started


def _busy_state() -> StreamState:
    """A stream with every kind of window: finished, remainder, retrying, in flight, fresh."""
    retry = Exponential(initial_ms=1_000, multiplier=1.5, max_ms=9_000, jitter=0.5)
    state, (first, second, third, fourth) = started(
        at(10, 5), max_in_flight=4, retry=retry, params={"q": "up"}, non_retryable={"auth"}
    )
    apply_result(state, ack(second, at(10, 1, 30)), at(10, 5))  # remainder + closed prefix
    apply_result(state, ack(third), at(10, 5))  # finished, waiting for the prefix
    apply_result(state, nack(fourth), at(10, 5))  # waiting for a retry
    only(advance(state, at(10, 6)))
    apply_result(state, nack(first, "core_metric"), at(10, 6))
    apply_control(state, Pause("cluster-a"), at(10, 6))
    return state


def test_a_busy_state_round_trips_through_json() -> None:
    state = _busy_state()
    assert any(w.closed for w in state.windows) and any(w.finished for w in state.windows)
    assert any(w.last_error for w in state.windows) and state.paused
    encoded = json.dumps(state_to_dict(state))
    assert state_from_dict(json.loads(encoded)) == state
    assert json.loads(encoded)["v"] == 1


def test_unannounced_windows_round_trip() -> None:
    state, (task,) = started(at(10, 5))
    apply_result(state, ack(task), at(10, 5))
    assert state.unannounced
    assert state_from_dict(json.loads(json.dumps(state_to_dict(state)))) == state


def test_the_encoding_is_compact() -> None:
    state, _ = started(at(10, 0))
    window = state_to_dict(state)["windows"][0]
    assert window == {"start_ms": at(10, 0), "end_ms": at(10, 1), "due_ms": at(10, 1)}


def _broken(change: dict[str, Any]) -> dict[str, Any]:
    state, _ = started(at(10, 1))
    encoded = state_to_dict(state)
    encoded.update(change)
    return encoded


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"v": 2}, "v"),
        ({"v": None}, "v"),
        ({"downstream_ms": "0"}, "downstream_ms"),
        ({"paused": 0}, "paused"),
        ({"config": {"stream_id": "s"}}, "start_ms"),
        ({"windows": [{"start_ms": 1, "end_ms": 2}]}, "due_ms"),
        (
            {"windows": [{"start_ms": 1, "end_ms": 2, "due_ms": 2, "attempt": "1"}]},
            "windows.attempt",
        ),
        ({"windows": 7}, "state"),
        ({"unannounced": [[1, 2, "maybe", 1]]}, "unannounced"),
        ({"unannounced": [[1, 2]]}, "unannounced"),
    ],
)
def test_a_malformed_state_raises_invalid_input(change: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        state_from_dict(_broken(change))
    assert caught.value.field == field


def test_a_missing_key_is_named() -> None:
    encoded = _broken({})
    del encoded["frontier_ms"]
    with pytest.raises(InvalidInput) as caught:
        state_from_dict(encoded)
    assert caught.value.field == "frontier_ms"
    with pytest.raises(InvalidInput):
        state_from_dict([1, 2])


def test_a_busy_state_round_trips_through_its_stored_row() -> None:
    state = _busy_state()
    encoded = json.dumps(state_to_row(state))
    assert state_from_row(json.loads(encoded)) == state
    assert json.loads(encoded)[0] == 2


def test_the_stored_form_reads_rows_and_readable_dicts() -> None:
    state = _busy_state()
    assert state_from_stored(state_to_row(state)) == state
    assert state_from_stored(state_to_dict(state)) == state


def test_a_window_row_holds_its_fields_in_order() -> None:
    state, _ = started(at(10, 0))
    (window,) = state_to_row(state)[6]
    assert window == [
        at(10, 0), at(10, 1), at(10, 1), 0, False, None, None, None, 0, None, False, [], None,
    ]  # fmt: skip


def _broken_row(index: int, value: Any) -> list[Any]:
    state, _ = started(at(10, 1))
    row = state_to_row(state)
    row[index] = value
    return row


_WINDOW = [1, 2, 2, 0, False, None, None, None, 0, None, False, [], None]


@pytest.mark.parametrize(
    ("index", "value", "field"),
    [
        (0, 1, "v"),
        (0, None, "v"),
        (2, "0", "downstream_ms"),
        (5, 0, "paused"),
        (1, {"stream_id": "s"}, "start_ms"),
        (6, [_WINDOW[:3]], "windows"),
        (6, [[*_WINDOW[:3], "1", *_WINDOW[4:]]], "windows.attempt"),
        (6, [[*_WINDOW[:4], 1, *_WINDOW[5:]]], "windows"),
        (6, [[*_WINDOW[:9], ["kind"], *_WINDOW[10:]]], "state"),
        (6, 7, "state"),
        (7, [[1, 2, "maybe", 1]], "unannounced"),
        (8, -1, "incarnation"),
        (10, "soon", "deleted_ms"),
    ],
)
def test_a_malformed_row_raises_invalid_input(index: int, value: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        state_from_row(_broken_row(index, value))
    assert caught.value.field == field


def test_a_row_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        state_from_row(_broken_row(0, 2)[:-1])
    assert caught.value.field == "state"
    with pytest.raises(InvalidInput) as caught:
        state_from_row({"v": 2})
    assert caught.value.field == "v"


def test_a_stored_config_holds_only_what_differs_from_the_defaults() -> None:
    config = StreamConfig("cluster-a", at(10, 0), window_ms=1_000, step_ms=1_000)
    assert config_to_stored(config) == {
        "stream_id": "cluster-a", "start_ms": at(10, 0), "window_ms": 1_000, "step_ms": 1_000,
    }  # fmt: skip
    assert config_from_stored(config_to_stored(config)) == config
    state, _ = started(at(10, 0))
    assert state_to_row(state)[1] == config_to_stored(state.config)


def test_a_config_set_away_from_every_default_is_stored_whole() -> None:
    config = _busy_state().config
    stored = config_to_stored(config)
    assert set(stored) >= {"retry", "params", "non_retryable", "max_in_flight"}
    assert config_from_stored(json.loads(json.dumps(stored))) == config


def test_a_row_stored_with_the_whole_config_still_decodes() -> None:
    """Rows written before the stored config left its defaults out hold every field."""
    state = _busy_state()
    row = state_to_row(state)
    row[1] = config_to_dict(state.config)
    assert state_from_row(json.loads(json.dumps(row))) == state
    minimal, _ = started(at(10, 0))
    row = state_to_row(minimal)
    row[1] = config_to_dict(minimal.config)
    assert state_from_row(row) == minimal


def test_the_stored_defaults_are_the_configs_defaults() -> None:
    defaults = config_to_dict(StreamConfig("s", 0))
    del defaults["stream_id"], defaults["start_ms"]
    assert defaults == STORED_CONFIG_DEFAULTS, (
        "a StreamConfig default moved: leave STORED_CONFIG_DEFAULTS as it is, so that stored "
        "configs keep their meaning (config_to_stored stores a field whenever it differs from "
        "that table, so the new default is stored), and make this test expect the difference"
    )


def test_a_stored_config_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        config_from_stored(["cluster-a", 0])
    assert caught.value.field == "config"
    with pytest.raises(InvalidInput) as caught:
        config_from_stored({"start_ms": 0})
    assert caught.value.field == "stream_id"
