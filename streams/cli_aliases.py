"""What the processes' typer commands share: old flag spellings kept working as hidden,
deprecated aliases of the ones every command now shares (`--log-level`, `--host`, `--port`; a
warning on stderr says which to use instead), and a command run as a program (`main`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def aliased(value: T, old_value: T | None, old: str, new: str) -> T:
    """`value` (given as `new`), or `old_value` when the deprecated `old` spelling was used."""
    if old_value is None:
        return value
    print(f"warning: {old} is deprecated; use {new}", file=sys.stderr)
    return old_value


def run_as_program(command: Any, argv: Sequence[str] | None, prog_name: str) -> int:
    """Run a click/typer `command` over `argv` (default: ``sys.argv[1:]``) and return its exit
    code instead of raising SystemExit (0 on a clean stop, 2 for bad options)."""
    try:
        command.main(args=list(sys.argv[1:] if argv is None else argv), prog_name=prog_name)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
