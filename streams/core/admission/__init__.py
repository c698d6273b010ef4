"""Admission control: per-source limits, the share of them each coordinator takes, paced
recovery, and live windows before backfill (issue 29). Pure: counts and `now_ms` in, decisions
out; the coordinator counts and dispatches.

- `limits`: `SourceLimits`, a source's limits, and their JSON object (`limits_from_dict`).
- `control`: `SourceSet` and `SourceDelete`, the controls that set and delete them.
- `bucket`: `TokenBucket`, the rate of dispatches.
- `pacing`: `Pacer`, the slow start of a recovery.
- `share`: `allocate`, `spread` and `grant`, each coordinator's share of a source's cap,
  and the bound.
- `gate`: `classify` and `SourceGate`, the decision before each dispatch (its rule table).
"""

from streams.core.admission.bucket import TokenBucket
from streams.core.admission.control import SourceControl, SourceDelete, SourceSet
from streams.core.admission.gate import (
    CATCHUP,
    LIVE,
    REPLAY,
    Class,
    SourceGate,
    backfill_floor,
    classify,
)
from streams.core.admission.limits import (
    DEFAULT_BACKFILL_SHARE,
    DEFAULT_PACE_START,
    SourceLimits,
    limits_from_dict,
    limits_to_dict,
)
from streams.core.admission.pacing import Pacer
from streams.core.admission.share import Shares, allocate, grant, spread

__all__ = [
    "CATCHUP",
    "DEFAULT_BACKFILL_SHARE",
    "DEFAULT_PACE_START",
    "LIVE",
    "REPLAY",
    "Class",
    "Pacer",
    "Shares",
    "SourceControl",
    "SourceDelete",
    "SourceGate",
    "SourceLimits",
    "SourceSet",
    "TokenBucket",
    "allocate",
    "backfill_floor",
    "classify",
    "grant",
    "limits_from_dict",
    "limits_to_dict",
    "spread",
]
