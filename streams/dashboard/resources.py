"""The status page's files (`static/`: HTML, CSS, JS), read as package resources.

They ship in the wheel as package data (pyproject.toml), so an installed dashboard reads them
from its own package, never from a checkout.
"""

from __future__ import annotations

from importlib.resources import files

PACKAGE = "streams.dashboard"
STATIC = "static"
FILES = (
    "index.html",
    "page.css",
    "table.css",
    "timeline.css",
    "sources.css",
    "page.js",
    "table.js",
    "timeline.js",
    "sources.js",
)


def read(name: str) -> str:
    """The text of `static/<name>` (UTF-8); FileNotFoundError if the package lacks it."""
    return (files(PACKAGE) / STATIC / name).read_text(encoding="utf-8")
