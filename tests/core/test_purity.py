"""The core is pure: it imports only the standard library, itself, streams.errors and msgspec
(for its value types alone: no I/O; see streams.core.model)."""

import ast
import subprocess
import sys
from pathlib import Path

import streams.core

CORE = Path(streams.core.__file__).parent
ALLOWED_PROJECT_MODULES = ("streams.core", "streams.errors")
ALLOWED_THIRD_PARTY = ("msgspec",)
BANNED = ("faust", "mode", "aiokafka", "confluent_kafka", "rocksdict", "requests", "pydantic")


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module that `path` imports, anywhere in the file, as (line, absolute name)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the core package
                package = ["streams", "core", *path.relative_to(CORE).parent.parts]
                base = package[: len(package) - (node.level - 1)]
                found.append((node.lineno, ".".join(base + ([node.module] if node.module else []))))
            else:
                found.append((node.lineno, node.module or ""))
    return found


def _allowed(module: str) -> bool:
    top = module.split(".")[0]
    if top == "streams":
        return any(module == m or module.startswith(m + ".") for m in ALLOWED_PROJECT_MODULES)
    return top in sys.stdlib_module_names or top in ALLOWED_THIRD_PARTY


def test_the_core_has_modules_to_check() -> None:
    assert len(list(CORE.rglob("*.py"))) >= 5


def test_core_modules_import_only_the_standard_library_and_the_core() -> None:
    offences = [
        f"{path.relative_to(CORE.parent.parent)}:{line} imports {module}"
        for path in sorted(CORE.rglob("*.py"))
        for line, module in _imports(path)
        if not _allowed(module)
    ]
    assert offences == []


def test_the_checker_catches_banned_imports(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("import faust\nfrom rocksdict import Rdict\ndef f():\n    import requests\n")
    assert [name for _, name in _imports(module) if not _allowed(name)] == [
        "faust",
        "rocksdict",
        "requests",
    ]
    for banned in BANNED:
        assert not _allowed(banned) and not _allowed(f"{banned}.sub")
    assert not _allowed("streams.coordinator")
    assert _allowed("streams.errors") and _allowed("streams.core.model") and _allowed("json")
    assert _allowed("msgspec.structs") and not _allowed("orjson")


def test_importing_the_core_loads_no_banned_package() -> None:
    code = (
        "import sys, streams.core, streams.errors;"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {BANNED!r}))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert output.strip() == "[]"
