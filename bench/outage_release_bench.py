"""The tasks a recovered source gets at once: held streams released when it leaves outage.

In-process over tests/coordinator/fakes.py (tests/coordinator/test_outage_release.py plays
the scenario): streams of one source fail from the start, are held once their budget is spent,
and the source answers again; printed: tasks a second while held, the most in one second after
recovery, and the first seconds of the release (from the step the guard saw the recovery; the
first counts what answers sent in the second before), without admission and with it (the
coordinators' default: a slow start, streams.core.admission.pacing).

    .venv/bin/python bench/outage_release_bench.py --streams 600 2000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.coordinator.test_outage_release import release_burst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[600])
    parser.add_argument("--transactional", action="store_true")
    args = parser.parse_args()
    print("admission  streams  held  tasks/s held (mean, peak)  most/s after  release, per s")
    for streams in args.streams:
        for paced in (False, True):
            b = release_burst(streams, args.transactional, paced=paced)
            steps = " ".join(str(n) for n in b.release_steps)
            print(f"{'paced' if paced else 'none':>9} {b.streams:8d} {b.held:5d}"
                  f" {b.before_per_s:14.1f} {b.before_peak:6d} {b.recovery_per_s:12d}"
                  f"  {steps}")  # fmt: skip


if __name__ == "__main__":
    main()
