"""The status page's modules: each one idea, small enough to read in one sitting."""

from __future__ import annotations

from pathlib import Path

import pytest

import streams.dashboard

MAX_LINES = 400
DASHBOARD = Path(streams.dashboard.__file__).parent
READ_SIDE = [DASHBOARD.parent / "readmodel.py", DASHBOARD.parent / "readview.py"]


@pytest.mark.parametrize(
    "module", [*sorted(DASHBOARD.glob("*.py")), *READ_SIDE], ids=lambda p: p.name
)
def test_every_module_is_under_400_lines(module: Path) -> None:
    lines = len(module.read_text(encoding="utf-8").splitlines())
    assert lines < MAX_LINES, f"{module.name} has {lines} lines"


def test_no_page_code_lives_in_python_strings() -> None:
    """The HTML, CSS and JS are files under static/; a module holding a large literal of one
    (a script, a style sheet, a document) has brought it back."""
    for module in DASHBOARD.glob("*.py"):
        text = module.read_text(encoding="utf-8")
        for marker in ('"use strict"', "document.", "<!doctype", "box-sizing", "<tbody"):
            assert marker not in text, f"{module.name} holds page code ({marker!r})"
