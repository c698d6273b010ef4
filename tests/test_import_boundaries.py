"""Import boundaries of `streams/`, read from the source (ast) and followed transitively.

Every import counts, wherever it stands: at the top, inside a function (it runs when called)
and under `TYPE_CHECKING` (it ties the modules all the same). Importing `a.b.c` also runs the
packages `a` and `a.b`, so the closures below follow those too; cycles do not (a package that
imports its own modules is no loop). Run this file to see the graph's offences with the import
chain that leads to each.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Mapping
from fnmatch import fnmatch
from pathlib import Path

import pytest

import streams

ROOT = Path(streams.__file__).parent.parent
PROCESSOR = "streams.coordinator.processor"
# The engines' libraries: the Processor, shared by both engines, reaches none of them.
ENGINE_LIBRARIES = ("confluent_kafka", "faust", "mode", "aiokafka", "rocksdict")
# One importer per library: the files that may import it, and nothing else in streams/.
IMPORTERS: Mapping[str, tuple[str, ...]] = {
    "confluent_kafka": ("streams/kafka/*.py",),
    "faust": ("streams/coordinator/faust/app.py",),
    "mode": ("streams/coordinator/faust/app.py",),
    "aiokafka": ("streams/coordinator/faust/app.py",),
    "rocksdict": ("streams/coordinator/confluent/rocks.py",),
}
# The core's exceptions (tests/core/test_purity.py): the project's errors and msgspec's structs.
CORE_ALLOWED = ("streams.core", "streams.errors", "msgspec")
Graph = dict[str, set[str]]


def modules(root: Path, package: str = "streams") -> dict[str, Path]:
    """Every module of `package` under `root`, by dotted name (a package by its own name)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """What module `name` (at `path`) imports: the dotted names as far as they are modules of
    `known` (`from a import b` is module `a.b` when there is one), else as written."""
    known = set(known)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.add(child if child in known else base)
    return found


@functools.cache
def graph(root: Path = ROOT) -> Graph:
    """Module -> what it imports, for every module of `streams/`."""
    known = modules(root)
    return {name: imports(name, path, known) for name, path in known.items()}


def loaded_by(name: str) -> list[str]:
    """`name` and the packages above it: what `import name` runs."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def closure(g: Graph, start: str) -> dict[str, str | None]:
    """Everything importing `start` loads, each with the module that imported it first."""
    parent: dict[str, str | None] = {start: None}
    todo = [start]
    while todo:
        current = todo.pop()
        for target in sorted(g.get(current, ())):
            for loaded in loaded_by(target):
                if loaded not in parent:
                    parent[loaded] = current
                    if loaded in g:
                        todo.append(loaded)
    return parent


def chain(parent: Mapping[str, str | None], name: str) -> str:
    links = [name]
    while (up := parent[links[-1]]) is not None:
        links.append(up)
    return " -> ".join(reversed(links))


def cycles(g: Graph) -> list[frozenset[str]]:
    """The strongly connected groups of two modules or more (Tarjan), by direct imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(g[node] & g.keys()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(frozenset(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(g)))
    try:
        for node in sorted(g):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return found


def folder(name: str) -> str:
    """The part of `streams` a module belongs to: `streams.worker` for `streams.worker.x`."""
    return ".".join(name.split(".")[:2])


def folder_graph(g: Graph) -> Graph:
    folders: Graph = {}
    for name, targets in g.items():
        edges = folders.setdefault(folder(name), set())
        edges.update(folder(t) for t in targets if t in g and folder(t) != folder(name))
    return folders


def top(name: str) -> str:
    return name.split(".")[0]


def banned_reached(g: Graph, start: str, libraries: Iterable[str]) -> list[str]:
    parent = closure(g, start)
    return [chain(parent, name) for name in sorted(parent) if top(name) in set(libraries)]


# -- the rules ----------------------------------------------------------------------------------


def test_the_graph_reads_the_tree() -> None:
    g = graph()
    assert len(g) > 100
    assert "streams.kafka.partitioner" in g[PROCESSOR]
    assert "streams.core" in closure(g, PROCESSOR)


def test_the_processor_reaches_no_engine_library() -> None:
    """The Processor is shared by both engines: Kafka clients, Faust and RocksDB stay with them."""
    assert banned_reached(graph(), PROCESSOR, ENGINE_LIBRARIES) == []


def test_importing_the_processor_loads_no_engine_library() -> None:
    """The same, as Python sees it: what `import` loads, dynamic imports included."""
    code = (
        f"import sys, {PROCESSOR};"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {ENGINE_LIBRARIES!r}))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT
    ).stdout
    assert output.strip() == "[]"


def test_the_core_reaches_only_itself_and_the_standard_library() -> None:
    """Transitively; besides the standard library, only CORE_ALLOWED (as test_purity)."""
    g = graph()
    offences = []
    for name in sorted(m for m in g if m == "streams.core" or m.startswith("streams.core.")):
        parent = closure(g, name)
        for reached in sorted(parent):
            allowed = reached == "streams" or any(  # the root package: a docstring, a version
                reached == a or reached.startswith(a + ".") for a in CORE_ALLOWED
            )
            if not allowed and top(reached) not in sys.stdlib_module_names:
                offences.append(chain(parent, reached))
    assert offences == []


def test_no_import_loops() -> None:
    assert [sorted(c) for c in cycles(graph())] == []


def test_no_loops_between_the_folders_of_streams() -> None:
    """`worker/` -> `kafka/` -> `worker/` and the like: a folder sits above what it imports."""
    assert [sorted(c) for c in cycles(folder_graph(graph()))] == []


def test_the_shipped_runtime_imports_no_development_tool() -> None:
    """The local broker and the demo (`streams/dev/`) run beside Tidemark, never inside it."""
    g = graph()
    dev = "streams.dev"
    offences = [
        f"{name} imports {target}"
        for name, targets in g.items()
        if not (name == dev or name.startswith(dev + "."))
        for target in sorted(targets)
        if target == dev or target.startswith(dev + ".")
    ]
    assert offences == []
    assert "streams.dev.broker" in g and "streams.dev.demo" in g


def test_the_shipped_runtime_imports_no_test_kit() -> None:
    """The test kit (`streams/testing/`) drives the worker; the worker never needs it."""
    g = graph()
    kit = "streams.testing"
    offences = [
        f"{name} imports {target}"
        for name, targets in g.items()
        if not (name == kit or name.startswith(kit + "."))
        for target in sorted(targets)
        if target == kit or target.startswith(kit + ".")
    ]
    assert offences == []
    assert "streams.testing.worker" in g


def test_kafka_imports_nothing_of_the_worker_nor_the_coordinator() -> None:
    """`kafka/` is the floor under both: its adapters speak their own types."""
    g = graph()
    offences = [
        f"{name} imports {target}"
        for name, targets in g.items()
        if folder(name) == "streams.kafka"
        for target in sorted(targets)
        if folder(target) in ("streams.worker", "streams.coordinator")
    ]
    assert offences == []


def misplaced(root: Path) -> list[str]:
    """Imports of a library of IMPORTERS from a file that is not among its importers."""
    offences = []
    for name, path in modules(root).items():
        where = path.relative_to(root).as_posix()
        for target in sorted(imports(name, path, ())):
            allowed = IMPORTERS.get(top(target))
            if allowed is not None and not any(fnmatch(where, glob) for glob in allowed):
                offences.append(f"{where} imports {target}")
    return offences


def test_each_library_has_its_own_importers() -> None:
    """confluent-kafka in `kafka/` only, Faust in the Faust engine, RocksDB in its store."""
    assert misplaced(ROOT) == []


def _bans(config: Mapping[str, object]) -> set[str]:
    lint = config.get("lint", {})
    assert isinstance(lint, dict)
    return set(lint.get("flake8-tidy-imports", {}).get("banned-api", {}))


def test_no_ruff_ignore_lifts_every_ban_of_a_shipped_file() -> None:
    """TID251 is one code for every banned import: ignoring it for a file of `streams/` would
    let that file import any of the libraries. Shipped code lifts one ban at a time: a nested
    ruff.toml that bans all but one, or `# noqa: TID251` on a line that imports one library."""
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    ignores = root["lint"].get("per-file-ignores", {})
    shipped = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "streams").rglob("*.py"))]
    lifting = [
        glob
        for glob, codes in ignores.items()
        if any(code.startswith("TID") for code in codes)
        and any(fnmatch(path, glob) for path in shipped)
    ]
    assert lifting == []
    banned = _bans(root)
    assert set(ENGINE_LIBRARIES) <= banned
    nested = sorted((ROOT / "streams").rglob("ruff.toml"))
    assert nested, "streams/kafka/ruff.toml lifts the confluent-kafka ban"
    for path in nested:
        config = tomllib.loads(path.read_text())
        assert config.get("extend"), f"{path} must extend the root's config"
        assert "per-file-ignores" not in config.get("lint", {}), path
        assert len(banned - _bans(config)) == 1, f"{path} lifts more than one ban"
    kafka = tomllib.loads((ROOT / "streams" / "kafka" / "ruff.toml").read_text())
    assert banned - _bans(kafka) == {"confluent_kafka"}
    for path in sorted((ROOT / "streams").rglob("*.py")):
        text = path.read_text()
        assert "ruff: noqa" not in text and "flake8: noqa" not in text, path


# -- the checker catches what it should ---------------------------------------------------------


def _tree(tmp_path: Path, files: Mapping[str, str]) -> Graph:
    for relative, text in {"streams/__init__.py": "", **files}.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return graph(tmp_path)


def test_the_checker_follows_imports_through_functions_packages_and_type_checking(
    tmp_path: Path,
) -> None:
    g = _tree(
        tmp_path,
        {
            "streams/a/__init__.py": "from . import b\n",
            "streams/a/b.py": "def f():\n    from streams.c import x\n",
            "streams/c/__init__.py": "import confluent_kafka\n",
            "streams/c/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from streams.a.b import f\n",
            "streams/d.py": "from streams.a import b\n",
        },
    )
    assert g["streams.a"] == {"streams.a.b"}
    assert g["streams.c.x"] == {"typing", "streams.a.b"}
    # `streams.c.x` runs the package `streams.c` first, which imports the client.
    assert banned_reached(g, "streams.d", ["confluent_kafka"]) == [
        "streams.d -> streams.a.b -> streams.c -> confluent_kafka"
    ]
    assert cycles(g) == [frozenset({"streams.a.b", "streams.c.x"})]
    assert cycles(folder_graph(g)) == [frozenset({"streams.a", "streams.c"})]


def test_the_checker_finds_a_library_out_of_its_place(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "streams/kafka/x.py": "import confluent_kafka\nfrom faust import App\n",
            "streams/coordinator/confluent/rocks.py": "from rocksdict import Rdict\n",
            "streams/worker/y.py": "def f():\n    import confluent_kafka.admin\n",
        },
    )
    assert misplaced(tmp_path) == [
        "streams/kafka/x.py imports faust",
        "streams/worker/y.py imports confluent_kafka.admin",
    ]


def test_the_checker_lets_a_clean_tree_pass(tmp_path: Path) -> None:
    g = _tree(
        tmp_path,
        {"streams/a.py": "import json\nfrom streams import b\n", "streams/b.py": "import os\n"},
    )
    assert cycles(g) == [] and cycles(folder_graph(g)) == []
    assert banned_reached(g, "streams.a", ENGINE_LIBRARIES) == []


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
