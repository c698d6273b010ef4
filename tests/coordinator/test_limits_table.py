"""streams.coordinator.limits_table: the limits are not known until `sources` is read to its end,
or until the guard's stale time has passed since they were first asked for (then logged)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from streams.coordinator import limits_table as module
from streams.coordinator.settings import CoordinatorSettings
from streams.core.admission import SourceLimits
from streams.topics import Topics


class FakeTable:
    def __init__(self, *args: Any) -> None:
        self.read_up = False
        self.values = {b"a": SourceLimits("a", max_in_flight=3)}

    def caught_up(self) -> bool:
        return self.read_up

    def snapshot(self) -> dict[bytes, SourceLimits]:
        return dict(self.values)


def test_unknown_until_read_up_then_the_latest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "GlobalTable", FakeTable)
    clock = [100.0]
    table, latest = module.limits_table(
        CoordinatorSettings(topics=Topics("t"), health_stale_ms=20_000), lambda: clock[0]
    )
    assert latest() is None
    clock[0] += 5
    assert latest() is None
    table.read_up = True  # type: ignore[attr-defined]
    assert latest() == {"a": SourceLimits("a", max_in_flight=3)}


def test_a_table_never_read_up_gives_what_it_has_after_the_stale_time(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(module, "GlobalTable", FakeTable)
    clock = [100.0]
    _, latest = module.limits_table(
        CoordinatorSettings(topics=Topics("t"), health_stale_ms=20_000), lambda: clock[0]
    )
    assert latest() is None  # first asked at 100 s
    clock[0] = 119.9
    assert latest() is None
    clock[0] = 120.0
    with caplog.at_level(logging.WARNING, logger="streams.coordinator"):
        assert latest() == {"a": SourceLimits("a", max_in_flight=3)}
        assert latest() is not None
    (record,) = caplog.records  # said once
    assert "not read to its end 20 s after admission first asked for it" in record.getMessage()
