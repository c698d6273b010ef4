"""Where the tests find Helm: env TIDEMARK_HELM, else the binary scripts/install-helm.sh builds
into the per-user cache (`make system-deps` runs it). Under CI=true a missing helm fails the
test; elsewhere it skips, naming the command that builds it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "scripts" / "install-helm.sh"


def helm_version() -> str:
    """The version scripts/install-helm.sh builds (scripts/helm-version)."""
    return (ROOT / "scripts" / "helm-version").read_text().strip()


def cached_helm() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "tidemark" / "tools" / f"helm-{helm_version()}" / "helm"


def helm_binary() -> Path:
    """The helm to run; fails (CI) or skips (elsewhere) when there is none."""
    named = os.environ.get("TIDEMARK_HELM")
    path = Path(named) if named else cached_helm()
    if path.is_file() and os.access(path, os.X_OK):
        return path
    where = f"TIDEMARK_HELM={named}" if named else str(path)
    message = f"helm not found at {where}; build it with: bash {INSTALL.relative_to(ROOT)}"
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)
