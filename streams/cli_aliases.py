"""Old flag spellings kept working as hidden, deprecated aliases of the ones every command now
shares (`--log-level`, `--host`, `--port`): a warning on stderr says which to use instead."""

from __future__ import annotations

import sys
from typing import TypeVar

T = TypeVar("T")


def aliased(value: T, old_value: T | None, old: str, new: str) -> T:
    """`value` (given as `new`), or `old_value` when the deprecated `old` spelling was used."""
    if old_value is None:
        return value
    print(f"warning: {old} is deprecated; use {new}", file=sys.stderr)
    return old_value
