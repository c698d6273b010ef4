"""The tasks a recovered source gets at once: held streams released when it leaves outage.

In-process over tests/coordinator/fakes.py (tests/coordinator/test_outage_release.py plays
the scenario): streams of one source fail from the start, are held once their budget is spent,
and the source answers again; printed: tasks a second while held, and in the second of
recovery (issue 25, defect 8: release() has no pacing yet).

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
    print("streams  held  tasks/s held (mean, peak)  tasks in the second of recovery")
    for streams in args.streams:
        b = release_burst(streams, args.transactional)
        print(f"{b.streams:7d} {b.held:5d} {b.before_per_s:14.1f} {b.before_peak:6d}"
              f" {b.recovery_per_s:24d}")  # fmt: skip


if __name__ == "__main__":
    main()
