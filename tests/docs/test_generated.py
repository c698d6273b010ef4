"""The generated reference pages (scripts/gen_docs.py) are what the code makes, and document
every setting and environment variable the code reads."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_docs"] = module
    spec.loader.exec_module(module)
    return module


GEN = _gen()


def test_the_generated_pages_are_up_to_date() -> None:
    for path, text in GEN.pages().items():
        assert path.read_text() == text, f"run: python scripts/gen_docs.py ({path.name})"


def test_every_environment_variable_the_code_reads_is_documented() -> None:
    page = GEN.CONFIG_PAGE.read_text()
    found = GEN.env_names_in_code()
    assert {"TIDEMARK_BEHIND_THRESHOLD_S", "TIDEMARK_TOP_LAGGARDS", "TIDEMARK_TICK_MS"} <= set(
        found
    )
    assert "TIDEMARK_CONNECT_TIMEOUT_S" in found
    missing = sorted(set(found) - set(GEN.ENV_DOC))
    assert not missing, f"add to ENV_DOC in scripts/gen_docs.py: {missing}"
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    for name in found:
        words = GEN._cell(GEN.ENV_DOC[name])
        assert any(row.startswith(f"| `{name}` |") and words in row for row in rows), name


def test_the_scan_sees_os_environ_reads() -> None:
    """Every `environ.get("X")` / `env.get("X")` / `getenv("X")` under streams/ is in the scan."""
    pattern = re.compile(r"""(?:environ|env|getenv)(?:\.get)?\(\s*["']([A-Z0-9_]+)["']""")
    read = {
        name
        for path in (ROOT / "streams").rglob("*.py")
        for name in pattern.findall(path.read_text())
        if name.startswith(("TIDEMARK_", "KAFKA_"))
    }
    assert read, "the pattern finds nothing: it has gone stale"
    assert read <= set(GEN.env_names_in_code())


def test_every_settings_field_is_on_the_page() -> None:
    from streams.coordinator.settings import CoordinatorSettings
    from streams.worker.config import WorkerConfig

    page = GEN.CONFIG_PAGE.read_text()
    for cls in (CoordinatorSettings, WorkerConfig):
        for field in dataclasses.fields(cls):
            if field.name == "kafka":  # its own section: every KafkaSettings variable
                continue
            assert f"| `{field.name}`" in page or f"| `{field.name}." in page, field.name
    for attr in ("ratio", "min_streams", "max_hold_ms"):
        assert f"`outage.{attr}`" in page
