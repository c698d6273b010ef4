"""A result on its own terms, before any stream's window is read: whether its fields make sense
(`result_problem`), why an ended stream refuses it (`ended_reason`), and which incarnation of a
stream it answers (`incarnation_of` makes one at a creation, `other_incarnation` says why a
result of another is refused) and whether its worker serves the stream's pipeline
(`other_pipeline`; `other_owner` asks both). Both lanes ask it
(streams.core.lifecycle, streams.core.replay).
"""

from __future__ import annotations

import hashlib
import json

from streams.core.config import DEFAULT_PIPELINE, StreamConfig, config_to_dict
from streams.core.model import ErrorInfo, Result, StreamState

UNKNOWN_STREAM = "unknown stream"


def incarnation_of(config: StreamConfig, now_ms: int) -> int:
    """The identity of the stream created by upserting `config` at `now_ms`: 53 bits of a hash
    of both, so the same input always makes the same one (a replayed input decides the same).

    A delete forgets the stream entirely, so nothing can be counted across it; the creation time
    and config tell two creations apart unless both come at the same millisecond with the same
    config, and then a result of one is the very work the other asks for.
    """
    text = json.dumps([now_ms, config_to_dict(config)], sort_keys=True, separators=(",", ":"))
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 11


def other_incarnation(incarnation: object, current: int) -> str:
    return (
        f"incarnation {incarnation!r} is not the stream's ({current}): the result is for the "
        "stream as it was before it was deleted and created again"
    )


def other_pipeline(pipeline: str | None, stream_pipeline: str) -> str | None:
    """Why a result from a worker of `pipeline` cannot answer a task of a stream of
    `stream_pipeline`, or None. A worker runs its own pipeline's handler: its ack of another
    pipeline's window would mark work done that was never done (issue 28). A result that names
    no pipeline comes from a worker older than pipelines, which served the default one."""
    worker = DEFAULT_PIPELINE if pipeline is None else pipeline
    if worker == stream_pipeline:
        return None
    why = "" if pipeline is not None else " (a result without one is the default pipeline's)"
    return (
        f"pipeline {worker!r}{why} is not the stream's ({stream_pipeline!r}): a worker of "
        f"pipeline {worker!r} answered a task of pipeline {stream_pipeline!r}"
    )


def other_owner(result: Result, state: StreamState) -> str | None:
    """Why `result` is not the stream's to take, or None: it answers another incarnation of the
    stream, or it comes from a worker of another pipeline. Both lanes ask it."""
    incarnation = result.incarnation
    if incarnation is not None and incarnation != state.incarnation:
        return other_incarnation(incarnation, state.incarnation)
    pipeline = result.pipeline
    if (DEFAULT_PIPELINE if pipeline is None else pipeline) == state.config.pipeline:
        return None  # every result but a misrouted one: no call more on the hot path
    return other_pipeline(pipeline, state.config.pipeline)


def result_problem(result: Result, now_ms: int) -> str | None:
    """Why `result` cannot be applied on its own terms, or None."""
    if not isinstance(result, Result):
        return "not a Result"
    if type(now_ms) is not int:
        return "now_ms must be an integer"
    start_ms, end_ms = result.start_ms, result.end_ms
    if type(start_ms) is not int or type(end_ms) is not int or type(result.attempt) is not int:
        return "start_ms, end_ms and attempt must be integers"
    if start_ms >= end_ms:
        return "start_ms must be before end_ms"
    if result.attempt < 1:
        return "attempt must be >= 1"
    outcome = result.outcome
    if outcome == "ack":
        ack_ms = result.ack_ms
        if type(ack_ms) is not int or not start_ms < ack_ms <= end_ms:
            return f"ack_ms {ack_ms!r} must satisfy start_ms < ack_ms <= end_ms"
    elif outcome != "nack" and outcome != "heartbeat":
        return f"unknown outcome {outcome!r}"
    if result.error is not None and not isinstance(result.error, ErrorInfo):
        return "error must be an ErrorInfo"
    return None


def ended_reason(state: StreamState) -> str:
    """Why a finished or deleted stream takes no more input, and until when it is kept."""
    kept = f"its state is kept until {state.collect_at_ms()} (gc_grace_ms), then forgotten"
    if state.deleted_ms is not None:
        return f"{UNKNOWN_STREAM}: deleted at {state.deleted_ms}; {kept}"
    return (
        f"stream finished at end_ms {state.config.end_ms} (at {state.finished_ms}); "
        f"no window is left to answer; {kept}"
    )
