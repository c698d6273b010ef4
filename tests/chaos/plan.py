"""What the chaos run feeds Tidemark: its streams, by kind, and inputs made bad on purpose."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any, NamedTuple

from streams.coordinator.processor import partition_of

from .auditor import Incarnation, StreamPlan

FOREVER_MS = 10**13  # an outage that never ends (year 2286)
# The `source` kind: streams sharing source S, all down from their creation for this long, far
# past their budget; coordinators are killed during it (run.py, `Chaos.outage_faults`).
SOURCE = "S"
SOURCE_OUTAGE_MS = 90_000
# Their budget outlasts run.py's HEALTH_STALE_MS (20 s) and a takeover, as production's defaults
# do (5 min against 30 s): a coordinator SIGKILLed as the outage begins leaves counts from before
# it (none failing) that dilute the source's until they are stale, so the guard may learn of the
# outage that late (docs/concepts.md). A 5 s budget let a seed's early kills bypass a window
# 6 s into the outage (seed 121983).
SOURCE_BYPASS_AFTER_MS = 25_000
SOURCE_STREAMS_MIN = 12  # about 2 a partition: a coordinator's own share can make an outage


class Upsert(NamedTuple):
    stream_id: str
    kind: str
    fields: dict[str, Any]


def streams(now_ms: int, count: int = 200) -> list[Upsert]:
    """`count` streams: a fixed mix of kinds (scaled down below 200), the rest live."""
    live_start = now_ms - now_ms % 1000 - 2000
    # A task's deadline covers the transaction commit that makes it visible and the worker's queue.
    second = {
        "window_ms": 1000,
        "step_ms": 1000,
        "task_timeout_ms": 10_000,
        "bypass_after_ms": 20_000,
        "max_in_flight": 4,  # a stream that fell behind in a fault catches up again
    }
    fast = {"retry": {"strategy": "fixed", "interval_ms": 300}}
    kinds: list[tuple[str, int, dict[str, Any]]] = [
        ("catchup", 40, {"start_ms": now_ms - 60_000, "window_ms": 2000, **fast}),
        (
            "outage",
            16,
            {
                "start_ms": live_start,
                "window_ms": 2000,
                "bypass_after_ms": 60_000,
                "max_in_flight": 2,
                "retry": {"strategy": "fixed", "interval_ms": 1000},
                "params": {"outage_until_ms": now_ms + 15_000},
            },
        ),
        (
            "flaky",
            16,
            {
                "start_ms": now_ms - 30_000,
                "window_ms": 2000,
                "bypass_after_ms": 3000,
                "max_in_flight": 4,
                **fast,
                "params": {"failure_probability": 0.4},
            },
        ),
        (
            "failing",
            10,
            {
                "start_ms": live_start,
                "window_ms": 4000,
                "bypass_after_ms": 3000,
                "retry": {"strategy": "fixed", "interval_ms": 1000},
                "params": {"outage_until_ms": FOREVER_MS},
            },
        ),
        (
            "heartbeat",
            4,
            {
                "start_ms": live_start,
                "window_ms": 2000,
                "task_timeout_ms": 9000,
                "bypass_after_ms": 30_000,
                "retry": {"strategy": "fixed", "interval_ms": 500},
                "params": {"latency_ms": 4000},  # past a third of the timeout: heartbeats
            },
        ),
        (
            "nonretryable",
            6,
            {
                "start_ms": live_start,
                "window_ms": 2000,
                "bypass_after_ms": 600_000,
                "non_retryable": ["outage"],
                "max_in_flight": 2,
                # Its nacks bypass at once; a timeout (a worker killed holding its task) is
                # retried, and the default 60 s retry outlasted the run's 60 s catch-up wait.
                **fast,
                "params": {"outage_until_ms": FOREVER_MS},
            },
        ),
        (
            "max_attempts",
            4,
            {
                "start_ms": live_start,
                "bypass_after_ms": 600_000,
                "max_attempts": 2,
                "retry": {"strategy": "immediate"},
                "params": {"failure_probability": 0.5},
            },
        ),
        (
            "replay",
            4,
            {
                "start_ms": live_start,
                "window_ms": 2000,
                "bypass_after_ms": 2000,
                "retry": {"strategy": "fixed", "interval_ms": 500},
                "params": {"outage_until_ms": now_ms + 12_000, "failure_probability": 0},
            },
        ),
        (
            "source",
            12,
            {
                "start_ms": live_start,
                "window_ms": 2000,
                "bypass_after_ms": SOURCE_BYPASS_AFTER_MS,
                "retry": {"strategy": "fixed", "interval_ms": 1000},
                "source": SOURCE,
                "params": {"outage_until_ms": now_ms + SOURCE_OUTAGE_MS},
            },
        ),
        ("pause", 4, {"start_ms": live_start, "bypass_after_ms": 20_000, **fast}),
        ("recreate", 4, {"start_ms": live_start, "bypass_after_ms": 20_000, **fast}),
    ]
    out: list[Upsert] = []
    scale = min(1.0, count / 200)  # a smaller run keeps every kind, fewer of each
    for kind, n, fields in kinds:
        n = max(SOURCE_STREAMS_MIN if kind == "source" else 1, round(n * scale))
        out += [Upsert(f"{kind}-{i:03d}", kind, {**second, **fields}) for i in range(n)]
    # Live streams: 20 of 1 s windows, the others of 5 s, so that the whole run stays within
    # what two shared cores carry (about 100 tasks a second) with room to catch up.
    live = {"start_ms": live_start, "bypass_after_ms": 20_000, **fast}
    for i in range(count - len(out)):
        window = {"window_ms": 1000} if i < round(20 * scale) else {"window_ms": 5000}
        out.append(Upsert(f"live-{i:03d}", "live", {**second, **live, **window}))
    return out


def incarnation(fields: dict[str, Any], created_ms: int) -> Incarnation:
    return Incarnation(
        start_ms=fields["start_ms"],
        window_ms=fields.get("window_ms", 60_000),
        step_ms=fields.get("step_ms", 15_000),
        bypass_after_ms=fields.get("bypass_after_ms", 300_000),
        created_ms=created_ms,
        non_retryable=tuple(fields.get("non_retryable", ())),
        max_attempts=fields.get("max_attempts"),
        source=fields.get("source"),
        outage_until_ms=fields.get("params", {}).get("outage_until_ms"),
    )


def plan_of(upserts: list[Upsert], created_ms: int) -> dict[str, StreamPlan]:
    return {
        u.stream_id: StreamPlan(u.stream_id, u.kind, [incarnation(u.fields, created_ms)])
        for u in upserts
    }


# -- inputs made bad on purpose ------------------------------------------------------------------


class Bad(NamedTuple):
    topic: str  # control or results
    key: bytes | None
    value: bytes | None
    partition: int | None  # None: where murmur2 puts the key
    why: str


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def bad_inputs(rng: random.Random, count: int, partitions: int, real: list[str]) -> Iterator[Bad]:
    """`count` inputs that the wire contract says must be rejected, drawn at random.

    Streams named `fuzz-…` are never created; `real` streams only get values that cannot be
    read (so nothing of theirs may change). Lone surrogates, bad UTF-8 and random bytes, wrong
    keys and partitions, wrong types, missing fields, numbers past their bounds, deep nesting.
    """
    for i in range(count):
        fuzz = f"fuzz-{i}-{rng.randrange(10**6)}"
        upsert = {"type": "upsert", "stream_id": fuzz, "start_ms": 1_795_946_400_000}
        window = {"stream_id": fuzz, "start_ms": 1_795_946_400_000, "end_ms": 1_795_946_460_000}
        target = rng.choice(real)
        choice = rng.randrange(16)
        key: bytes | None = fuzz.encode()
        if choice == 0:
            value, why = b"\xff" + rng.randbytes(rng.randrange(0, 40)), "random bytes"
        elif choice == 1:
            value = rng.choice([b"[1, 2]", b'"upsert"', b"null", b"42", b"", b"{"])
            why = "not a JSON object"
        elif choice == 2:
            value, why = _dumps({**upsert, "start_ms": rng.choice(["now", 1.5, None, []])}), "type"
        elif choice == 3:
            value, why = _dumps({"type": "upsert", "stream_id": fuzz}), "missing start_ms"
        elif choice == 4:
            name, huge = rng.choice(
                [("start_ms", 2**63), ("window_ms", -15_000), ("max_in_flight", 10**6),
                 ("bypass_after_ms", 10**30), ("params", {"x": 2**70}), ("max_attempts", 0)]
            )  # fmt: skip
            value, why = _dumps({**upsert, name: huge}), f"{name} out of bounds"
        elif choice == 5:
            nested: Any = 1
            for _ in range(rng.randrange(65, 200)):
                nested = {"a": nested} if rng.random() < 0.5 else [nested]
            value, why = _dumps({**upsert, "params": {"deep": nested}}), "params nested too deep"
        elif choice == 6:
            value, why = _dumps({**upsert, "type": rng.choice(["explode", "", 7, None])}), "type"
        elif choice == 7:
            sid = fuzz + "\ud800"
            key = sid.encode("utf-8", "surrogatepass")
            value, why = json.dumps({**upsert, "stream_id": sid}).encode(), "lone surrogate"
        elif choice == 8:
            key, value, why = b"not-" + fuzz.encode(), _dumps(upsert), "key is not the stream_id"
        elif choice == 9:
            right = partition_of(fuzz.encode(), partitions)
            wrong = (right + rng.randrange(1, partitions)) % partitions
            yield Bad("control", key, _dumps(upsert), wrong, "wrong partition")
            continue
        elif choice == 10:
            value = _dumps({**window, "attempt": 1, "outcome": "ack", "ack_ms": window["end_ms"]})
            yield Bad("results", key, value, None, "a result of an unknown stream")
            continue
        elif choice == 11:
            key = target.encode()
            value = _dumps({"stream_id": target, "start_ms": rng.choice(["x", -1, 2**64, None]),
                            "end_ms": 1, "attempt": 1, "outcome": "ack", "ack_ms": 1})  # fmt: skip
            yield Bad("results", key, value, None, "result of a real stream with a bad start_ms")
            continue
        elif choice == 12:
            key = target.encode()
            value = _dumps({"type": rng.choice(["pause", "delete", "resume"]), "stream_id": 12})
            yield Bad("control", key, value, None, "a control whose stream_id is a number")
            continue
        elif choice == 13:
            value = _dumps({**window, "attempt": 1, "outcome": rng.choice(["maybe", 1, None])})
            yield Bad("results", key, value, None, "unknown outcome")
            continue
        elif choice == 14:
            key, value, why = None, _dumps(upsert), "no key"
        else:
            sid = "x" * 201
            key, value, why = sid.encode(), _dumps({**upsert, "stream_id": sid}), "id too long"
        yield Bad("control", key, value, None, why)
