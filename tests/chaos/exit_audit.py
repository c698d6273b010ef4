"""The chaos run's audit of its own processes and of the pace of `commits` (issue 26, item 3).

Pure: no broker, no process. The run records what it did and saw (run.py), this module says
what it means:

- **Faults** (`FaultLog`): each with its kind, its detail and its window, from the moment the
  run injects it to the moment it is over (the process or node restarted and back, the
  SIGSTOPped process resumed, the cluster's ISRs full again after a rolling restart).
- **Exits** (`Exit`): every coordinator or worker exit the run did not make itself. Any such
  exit is an "unplanned exit", a violation-class figure: the run fails on it as on a
  violation. It is a "native crash" when the process died of a signal the run did not send
  (a negative status from `Popen`, or 128 + SIGSEGV/SIGABRT from a shell), or when its output
  since its start holds "Fatal Python error" or "Segmentation fault" (faulthandler's report,
  or the C library's).
- **Stalls of `commits`** (`commit_stalls`): per fault kind, the longest time a partition of
  `commits` went without a new record once a fault of that kind had begun.
"""

from __future__ import annotations

import signal
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

NATIVE_MARKERS = ("Fatal Python error", "Segmentation fault")
NATIVE_SIGNALS = (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE)


def clock(at_ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at_ms / 1000))


@dataclass(frozen=True)
class Exit:
    """A process that ended without the run asking: its name, status and output since start."""

    name: str
    status: int
    at_ms: int
    output: str = ""

    @property
    def native(self) -> bool:
        if self.status < 0 or self.status - 128 in NATIVE_SIGNALS:
            return True
        return any(marker in self.output for marker in NATIVE_MARKERS)

    @property
    def cause(self) -> str:
        """The status as a person reads it: `status 1`, `signal SIGSEGV`."""
        number = -self.status if self.status < 0 else self.status - 128
        if self.status < 0 or number in NATIVE_SIGNALS:
            try:
                return f"signal {signal.Signals(number).name}"
            except ValueError:
                return f"signal {number}"
        return f"status {self.status}"

    def reason(self) -> str:
        """The output's most telling line: a native report, else the last error, else the last
        line; what the process said of its end."""
        lines = [line.strip() for line in self.output.splitlines() if line.strip()]
        for wanted in (NATIVE_MARKERS, ("ERROR", "CRITICAL", "Error", "Traceback")):
            found = [line for line in lines if any(w in line for w in wanted)]
            if found:
                return found[-1][:300]
        return lines[-1][:300] if lines else "(no output)"

    def line(self) -> str:
        kind = "native crash" if self.native else "unplanned exit"
        return f"{kind}: {self.name} at {clock(self.at_ms)}, {self.cause}: {self.reason()}"


@dataclass
class Fault:
    kind: str
    detail: str
    start_ms: int
    end_ms: int | None = None  # None: not over yet (the audit takes the run's end)

    def line(self) -> str:
        took = "" if self.end_ms is None else f" ({(self.end_ms - self.start_ms) / 1000:.1f} s)"
        return f"{clock(self.start_ms)} {self.kind}: {self.detail}{took}"


@dataclass
class FaultLog:
    """Every fault the run injected, in order, with its window."""

    faults: list[Fault] = field(default_factory=list)

    def begin(self, kind: str, detail: str, at_ms: int) -> Fault:
        fault = Fault(kind, detail, at_ms)
        self.faults.append(fault)
        return fault

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for f in self.faults:
            out[f.kind] += 1
        return dict(out)


@dataclass(frozen=True)
class Stall:
    """The longest stall of `commits` after the faults of one kind."""

    kind: str
    faults: int
    longest_ms: int
    partition: int  # of commits; -1 when no partition was read at all
    fault: Fault | None  # the fault it followed

    def line(self) -> str:
        after = "" if self.fault is None else f", after {self.fault.line()}"
        where = "" if self.partition < 0 else f" on commits[{self.partition}]"
        return (
            f"{self.kind} ({self.faults}): longest stall of commits "
            f"{self.longest_ms / 1000:.1f} s{where}{after}"
        )


def stall_after(times_ms: list[int], start_ms: int, end_ms: int, read_end_ms: int) -> int:
    """The longest time without a record of one partition, counted from `start_ms` at the
    earliest, over the gaps between consecutive records that begin inside the fault's window
    [`start_ms`, `end_ms`] or are under way at its start.

    A gap under way when the fault begins counts from the fault, not from the record before it
    (the time before the fault is not the fault's doing); a gap that begins after the window
    is another fault's, or none. When no record follows, the gap runs to `read_end_ms`, where
    the audited read ends: a partition that never commits again has stalled that long.
    """
    times = sorted(times_ms)
    before = [t for t in times if t <= start_ms]
    previous = before[-1] if before else start_ms
    longest = 0
    for t in times[len(before) :]:
        if previous > end_ms:
            return longest
        longest = max(longest, t - max(previous, start_ms))
        previous = t
    if previous <= end_ms:
        longest = max(longest, read_end_ms - max(previous, start_ms))
    return longest


def commit_stalls(
    read_ms: Mapping[int, list[int]], faults: list[Fault], read_end_ms: int
) -> list[Stall]:
    """Per fault kind (in order of first occurrence), the longest stall of any partition of
    `commits` after a fault of that kind (`stall_after`). `read_ms`: per partition, when each
    record was read by the auditor's read_committed consumer, so a transaction held open and
    committed late counts as the stall a consumer saw. The faults overlap (a process kill
    every few seconds): a stall is the longest seen after a fault of the kind, which another
    fault running at the same time may share."""
    by_kind: dict[str, list[Fault]] = defaultdict(list)
    for f in faults:
        by_kind[f.kind].append(f)
    out = []
    for kind, group in by_kind.items():
        best = Stall(kind, len(group), 0, -1, None)
        for f in group:
            end_ms = read_end_ms if f.end_ms is None else f.end_ms
            for partition, times in sorted(read_ms.items()):
                gap = stall_after(times, f.start_ms, end_ms, read_end_ms)
                if gap > best.longest_ms or best.fault is None:
                    best = Stall(kind, len(group), gap, partition, f)
        out.append(best)
    return out
