"""A pipeline factory's options, read from its signature: which there are, their types, which
are required, and the checks ``build_pipeline`` makes before it calls the factory.

An option is a parameter that can be passed by keyword. Internal hooks (a parameter whose
default is a function or whose annotation is a ``Callable``, such as the synthetic pipeline's
``now_ms`` and ``sleep``, which tests inject) are not options: the command line can give
nothing but text, and an error that listed them would send a user after them. A factory that
takes ``**options`` receives whatever it is given and checks it itself.

Values from the command line arrive as text and become what the annotation asks for (``int``,
``float``, ``bool``, ``str``, a path, a ``Literal``, an optional of these); an unannotated
option gets a number if the text reads as one. A value of the wrong type is refused naming the
option, as is an unknown option (listing the real ones) and a missing required one.
"""

from __future__ import annotations

import inspect
import os
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Final

from streams.errors import InvalidInput

_INT: Final = re.compile(r"[+-]?\d+")
_FLOAT: Final = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
_BOOLS: Final = {"true": True, "false": False, "yes": True, "no": False, "1": True, "0": False}
_NO_DEFAULT: Final = inspect.Parameter.empty


def number_or_text(text: str) -> int | float | str:
    """An integer or a decimal number if ``text`` reads as one, else the text itself."""
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return text


@dataclass(frozen=True)
class Option:
    """One keyword option of a factory: its name, annotation (None if it has none), and
    whether it must be given."""

    name: str
    annotation: Any
    required: bool


@dataclass(frozen=True)
class Options:
    """What a factory accepts: its options, and whether it takes any keyword (``**options``)."""

    options: Mapping[str, Option]
    any_keyword: bool

    def names(self) -> str:
        return ", ".join(self.options) or "(none)"


def factory_options(factory: Callable[..., Any]) -> Options:
    """The options of ``factory`` (a function, or a class through its ``__init__``)."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin without a signature: let it check for itself
        return Options({}, any_keyword=True)
    hints = _hints(factory)
    found: dict[str, Option] = {}
    any_keyword = False
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            any_keyword = True
            continue
        if param.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL):
            continue
        annotation = hints.get(param.name)
        if _is_hook(param, annotation):
            continue
        found[param.name] = Option(param.name, annotation, param.default is _NO_DEFAULT)
    return Options(found, any_keyword)


def checked_options(pipeline: str, accepted: Options, given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` checked against ``accepted`` and converted; raises ``InvalidInput`` naming
    the option (``options.<name>``) for an unknown, missing or ill-typed one."""
    out: dict[str, Any] = {}
    for name, value in given.items():
        option = accepted.options.get(name)
        if option is None:
            if accepted.any_keyword:
                out[name] = number_or_text(value) if isinstance(value, str) else value
                continue
            raise InvalidInput(
                f"options.{name}",
                f"unknown option for pipeline {pipeline!r}; known: {accepted.names()}",
            )
        out[name] = _converted(name, value, option.annotation)
    for option in accepted.options.values():
        if option.required and option.name not in out:
            raise InvalidInput(
                f"options.{option.name}", f"pipeline {pipeline!r} requires this option"
            )
    return out


def _hints(factory: Callable[..., Any]) -> dict[str, Any]:
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        return typing.get_type_hints(target)
    except Exception:  # an annotation that cannot be resolved here: check nothing by type
        return {}


def _is_hook(param: inspect.Parameter, annotation: Any) -> bool:
    default = param.default
    if default is not _NO_DEFAULT and callable(default) and not inspect.isclass(default):
        return True
    origin = typing.get_origin(annotation)
    if annotation is Callable or origin is Callable:  # typing.Callable and collections.abc's
        return True
    text = param.annotation if isinstance(param.annotation, str) else ""
    return text.startswith(("Callable", "collections.abc.Callable", "typing.Callable"))


def _members(annotation: Any) -> tuple[Any, ...]:
    """The types an annotation allows, with unions and ``Optional`` spread out."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return tuple(m for arg in typing.get_args(annotation) for m in _members(arg))
    return (annotation,)


def _converted(name: str, value: Any, annotation: Any) -> Any:
    """``value`` as ``annotation`` asks, converted from text if need be."""
    if annotation is None or annotation is Any:
        return number_or_text(value) if isinstance(value, str) else value
    members = _members(annotation)
    for member in members:
        ok, converted = _as(member, value)
        if ok:
            return converted
    wanted = " or ".join(_describe(m) for m in members)
    raise InvalidInput(f"options.{name}", f"must be {wanted}, got {value!r}")


def _as(member: Any, value: Any) -> tuple[bool, Any]:
    """Whether ``value`` is (or, as text, reads as) a ``member``, and as one."""
    text = value if isinstance(value, str) else None
    if member is type(None):
        return value is None, None
    if member is bool:
        if isinstance(value, bool):
            return True, value
        return (text is not None and text.lower() in _BOOLS), _BOOLS.get((text or "").lower())
    if member is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return True, value
        ok = text is not None and bool(_INT.fullmatch(text))
        return ok, int(text) if ok and text else None
    if member is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return True, float(value)
        ok = text is not None and bool(_FLOAT.fullmatch(text))
        return ok, float(text) if ok and text else None
    if member is str:
        return text is not None, text
    if _is_path(member):
        return isinstance(value, str | os.PathLike), value
    if typing.get_origin(member) is typing.Literal:
        for choice in typing.get_args(member):
            if value == choice or (text is not None and str(choice) == text):
                return True, choice
        return False, None
    return True, value  # a type this module does not know: the factory checks it


def _is_path(member: Any) -> bool:
    origin = typing.get_origin(member) or member
    return inspect.isclass(origin) and issubclass(origin, os.PathLike | PurePath)


def _describe(member: Any) -> str:
    if member is type(None):
        return "empty"
    if typing.get_origin(member) is typing.Literal:
        return "one of " + ", ".join(repr(c) for c in typing.get_args(member))
    if _is_path(member):
        return "a path"
    names = {int: "an integer", float: "a number", str: "text", bool: "true or false"}
    return names.get(member, getattr(member, "__name__", str(member)))
