"""What `tidemark sources` does without Kafka: parse the limit flags (`none` unsets an optional
one), merge them into a source's current limits, validate the result naming the flag, and render
entries as JSON documents and a table (and, for `tidemark status`, the status page's Sources
rows: streams.dashboard.sources).

The bounds are `SourceLimits`'s (streams.core.admission.limits); nothing here repeats them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.table import Table
from rich.text import Text

from streams.core.admission import SourceLimits, limits_from_dict, limits_to_dict
from streams.errors import InvalidInput
from streams.humanize import format_duration, format_time
from streams.wire import SourceEntry

# field -> its flag (the source's name is the NAME argument)
FLAGS = {
    "source": "NAME",
    "max_in_flight": "--max-in-flight",
    "rate_per_s": "--rate-per-s",
    "burst": "--burst",
    "backfill_share": "--backfill-share",
    "pace_start": "--pace-start",
}
OPTIONAL = ("max_in_flight", "rate_per_s", "burst")  # `none` unsets these
INTEGERS = ("max_in_flight", "burst", "pace_start")


def parse_changes(given: Mapping[str, str | None]) -> dict[str, Any]:
    """The fields the flags set: `{field: text or None}` (None: not given) parsed to numbers,
    `none` to None for an optional field; InvalidInput naming the flag."""
    changes: dict[str, Any] = {}
    for field, text in given.items():
        if text is None:
            continue
        flag = FLAGS[field]
        if text.strip().lower() == "none":
            if field not in OPTIONAL:
                raise InvalidInput(flag, "cannot be unset (none); give a number")
            changes[field] = None
            continue
        kind = "an integer" if field in INTEGERS else "a number"
        try:
            changes[field] = int(text) if field in INTEGERS else float(text)
        except ValueError:
            unset = " or none" if field in OPTIONAL else ""
            raise InvalidInput(flag, f"must be {kind}{unset}, got {text!r}") from None
    return changes


def validated(fields: Mapping[str, Any]) -> SourceLimits:
    """`limits_from_dict(fields)`, its InvalidInput naming the flag and the field."""
    try:
        return limits_from_dict(fields)
    except InvalidInput as exc:
        flag = FLAGS.get(exc.field)
        raise InvalidInput(f"{flag} ({exc.field})" if flag else exc.field, exc.reason) from None


def check_alone(source: str, changes: Mapping[str, Any]) -> None:
    """Check the name and each given value against its own bound, before anything talks to
    Kafka (how they combine is checked once merged with the current limits: `merge`)."""
    validated({"source": source})
    for field, value in changes.items():
        probe = {"source": source, field: value}
        if field == "burst" and value is not None:
            probe["rate_per_s"] = 1.0  # a burst is only allowed with a rate
        validated(probe)


def merge(source: str, current: SourceLimits | None, changes: Mapping[str, Any]) -> SourceLimits:
    """The current limits (none: the defaults) with `changes`, validated naming the flag.

    A burst not given follows the rate when it was at the rate's default (max(1,
    ceil(rate_per_s))), and goes with it when the rate is unset."""
    fields: dict[str, Any] = {"source": source}
    if current is not None:
        fields.update(limits_to_dict(current))
        if "burst" not in changes and current.rate_per_s is not None:
            default = SourceLimits(source, rate_per_s=current.rate_per_s).burst
            if current.burst == default or changes.get("rate_per_s", 0) is None:
                del fields["burst"]
    fields.update(changes)
    return validated(fields)


def entry_doc(entry: SourceEntry) -> dict[str, Any]:
    """A source's entry for `--output json`: every field of its limits, and `updated_ms`."""
    return {**limits_to_dict(entry.limits), "updated_ms": entry.updated_ms}


def _text(value: Any) -> str:
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


COLUMNS = ("max_in_flight", "rate_per_s", "burst", "backfill_share", "pace_start")


def sources_table(entries: Iterable[SourceEntry]) -> Table:
    """One row per source: its limits (`none`: no cap, no rate) and when they were applied."""
    table = Table(title=None, title_justify="left")
    table.add_column("source", overflow="fold")
    for name in (*COLUMNS, "updated"):
        table.add_column(name.replace("_", " "), justify="right")
    for entry in entries:
        limits = entry.limits
        cells = [_text(getattr(limits, name)) for name in COLUMNS]
        table.add_row(limits.source, *cells, format_time(entry.updated_ms))
    return table


def source_table(entry: SourceEntry) -> Table:
    """One source's limits, a field a row, with its flag."""
    table = Table(title=f"source {entry.limits.source}", title_justify="left")
    for name in ("field", "value", "flag"):
        table.add_column(name)
    for name in COLUMNS:
        table.add_row(name, _text(getattr(entry.limits, name)), FLAGS[name])
    table.add_row("updated", format_time(entry.updated_ms), "-")
    return table


def limit_text(limits: Mapping[str, Any] | None) -> str:
    """A Sources row's limits in a few words: "20 in flight, 5/s (burst 5)", or "none"."""
    if limits is None:
        return "none"
    parts = []
    if limits["max_in_flight"] is not None:
        parts.append(f"{limits['max_in_flight']:,} in flight")
    if limits["rate_per_s"] is not None:
        parts.append(f"{_text(limits['rate_per_s'])}/s (burst {limits['burst']})")
    return ", ".join(parts) or "pacing only"


def health_text(row: Mapping[str, Any], now_ms: int) -> Text:
    """A Sources row's health: "9 of 10 failing", in red and with since when in an outage."""
    if not row["partitions"]:
        return Text("no fresh health", style="dim")
    counts = f"{row['failing']:,} of {row['total']:,} failing"
    if not row["in_outage"]:
        return Text(counts)
    since, held = row["outage_since_ms"], ""
    if since is not None:  # whole seconds, the two largest units, as the outage line says
        held = f" for {format_duration(max(0, now_ms - since) // 1000 * 1000, parts=2)}"
    return Text(f"in outage{held}: {counts}", style="red")


def sources_load_table(rows: Iterable[Mapping[str, Any]], now_ms: int) -> Table:
    """The status page's Sources table (streams.dashboard.sources rows), without the charts."""
    table = Table(title="sources", title_justify="left")
    table.add_column("source", overflow="fold")
    table.add_column("health")
    table.add_column("limit")
    for name in ("in flight", "waiting", "pacing"):
        table.add_column(name, justify="right")
    for row in rows:
        limits = row["limits"]
        cap = limits["max_in_flight"] if limits is not None else None
        in_flight = f"{row['in_flight']:,}" + ("" if cap is None else f" / {cap:,}")
        pacing = "-" if row["pacing"] is None else f"{row['pacing']:,}"
        table.add_row(row["source"], health_text(row, now_ms), limit_text(limits), in_flight,
                      f"{row['waiting']:,}", pacing)  # fmt: skip
    return table
