"""The coordinator's admission (issue 29): the core's rules (streams.core.admission) applied to
every dispatch, per source.

- `gates`: `Admission`, the gate the core asks (streams.core.gate), one SourceGate per source,
  waking the streams it keeps waiting, each coordinator's share of a cap, paced recovery;
- `ledger`: `Ledger`, what it counts: each source's flights and waits on this coordinator.
"""

from streams.coordinator.admission.gates import Admission
from streams.coordinator.admission.ledger import Ledger

__all__ = ["Admission", "Ledger"]
