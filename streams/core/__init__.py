"""The pure window lifecycle core: no Kafka, Faust or RocksDB; time is an argument.

See `streams.core.lifecycle` for the rules of a stream's windows; the coordinator's own policies
are here too, each once: `takeover` (the takeover grace), `announce` (commit coalescing),
`lanes` (which lane owns a result), `retry` (also the retry after a tick's error), and
`config` (every config default and bound, which the wire codec reads). The lifecycle's API is
exported here.
"""

from streams.core.announce import announce
from streams.core.codec import (
    state_from_dict,
    state_from_row,
    state_from_stored,
    state_to_dict,
    state_to_row,
)
from streams.core.config import StreamConfig, config_from_dict, config_to_dict
from streams.core.due import next_due_ms
from streams.core.lifecycle import (
    advance,
    apply_control,
    apply_result,
    create_state,
)
from streams.core.model import (
    NACK_WITHOUT_ERROR,
    BypassRecord,
    Commit,
    CommittedWindow,
    Control,
    Decision,
    Delete,
    ErrorInfo,
    Pause,
    Result,
    Resume,
    StreamState,
    Task,
    Upsert,
    Window,
    bypass_key,
    task_id,
)
from streams.core.outage import (
    OutagePolicy,
    SourceCounts,
    in_outage,
    is_failing,
    release,
    sources_in_outage,
)
from streams.core.replay import Replay, ReplayDecision, ReplayState
from streams.core.retry import Exponential, Fixed, Immediate, RetryPolicy, retry_delay_ms

__all__ = [
    "NACK_WITHOUT_ERROR",
    "BypassRecord",
    "Commit",
    "CommittedWindow",
    "Control",
    "Decision",
    "Delete",
    "ErrorInfo",
    "Exponential",
    "Fixed",
    "Immediate",
    "OutagePolicy",
    "Pause",
    "Replay",
    "ReplayDecision",
    "ReplayState",
    "Result",
    "Resume",
    "RetryPolicy",
    "SourceCounts",
    "StreamConfig",
    "StreamState",
    "Task",
    "Upsert",
    "Window",
    "advance",
    "announce",
    "apply_control",
    "apply_result",
    "bypass_key",
    "config_from_dict",
    "config_to_dict",
    "create_state",
    "in_outage",
    "is_failing",
    "next_due_ms",
    "release",
    "retry_delay_ms",
    "sources_in_outage",
    "state_from_dict",
    "state_from_row",
    "state_from_stored",
    "state_to_dict",
    "state_to_row",
    "task_id",
]
