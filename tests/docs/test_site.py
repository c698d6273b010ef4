"""The documentation site builds with `mkdocs build --strict`: every page in the nav, every link
and anchor resolves, and nothing is fetched from the network (the theme and its extensions are
installed with the dev extras)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_strict(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    for page in ("index", "configuration", "wire-schemas", "runbook", "benchmarks"):
        name = "index.html" if page == "index" else f"{page}/index.html"
        assert (tmp_path / "site" / name).is_file(), page
    runbook = (tmp_path / "site" / "runbook" / "index.html").read_text()
    assert 'id="tidemarkcoordinatordown"' in runbook  # the alerts' runbook_url anchors survive
