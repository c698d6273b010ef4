"""Params checked against a pipeline's JSON Schema, each error naming the field (``params.x``).

The registry's schemas are the ones pydantic generates from a pipeline's params model
(streams.params), so this checks the part of JSON Schema those use: types, ``properties``,
``required``, ``additionalProperties``, ``items``, ``enum``/``const``, numeric and length
bounds, ``pattern``, ``$ref`` into ``$defs``, ``anyOf``/``oneOf``/``allOf``. A keyword it does
not know is ignored, never refused: the worker's own decode stays the last word.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping
from typing import Any

from streams.errors import InvalidInput

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
    "number": (int, float),
    "integer": (int,),
}


def check_params(schema: Mapping[str, Any], params: Mapping[str, Any]) -> None:
    """Raise InvalidInput("params.<field>", why) at the first part of ``params`` that
    ``schema`` refuses."""
    error = first_error(schema, params, schema, "params")
    if error is not None:
        raise InvalidInput(*error)


def first_error(
    schema: Mapping[str, Any], value: Any, root: Mapping[str, Any], where: str
) -> tuple[str, str] | None:
    """(field, reason) of the first error in ``value`` against ``schema``, or None."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        schema = _resolve(root, ref)
    for keyword in ("anyOf", "oneOf"):
        options = schema.get(keyword)
        if isinstance(options, list) and options:
            errors = [first_error(option, value, root, where) for option in options]
            if all(e is not None for e in errors):
                # The error of an option of the value's type, if one is: the likeliest intent.
                typed = [
                    e
                    for option, e in zip(options, errors, strict=True)
                    if e is not None and _is_type(value, _resolved(root, option).get("type", []))
                ]
                return (typed or [e for e in errors if e is not None])[0]
    for option in schema.get("allOf", ()):
        if (error := first_error(option, value, root, where)) is not None:
            return error
    kind = schema.get("type")
    if kind is not None and not _is_type(value, kind):
        return where, f"must be {_kinds(kind)}, got {_shown(value)}"
    if "const" in schema and value != schema["const"]:
        return where, f"must be {schema['const']!r}"
    if "enum" in schema and value not in schema["enum"]:
        return where, f"must be one of {', '.join(repr(v) for v in schema['enum'])}"
    if isinstance(value, dict):
        return _object_error(schema, value, root, where)
    if isinstance(value, list):
        return _array_error(schema, value, root, where)
    if isinstance(value, str):
        return _string_error(schema, value, where)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _number_error(schema, value, where)
    return None


def _object_error(
    schema: Mapping[str, Any], value: dict[str, Any], root: Mapping[str, Any], where: str
) -> tuple[str, str] | None:
    properties = schema.get("properties", {})
    for name in schema.get("required", ()):
        if name not in value:
            return f"{where}.{name}", "is required"
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        field = f"{where}.{name}"
        if name in properties:
            error = first_error(properties[name], item, root, field)
        elif extra is False:
            return field, "is not a param of this pipeline"
        elif isinstance(extra, Mapping):
            error = first_error(extra, item, root, field)
        else:
            error = None
        if error is not None:
            return error
    return None


def _array_error(
    schema: Mapping[str, Any], value: list[Any], root: Mapping[str, Any], where: str
) -> tuple[str, str] | None:
    if "minItems" in schema and len(value) < schema["minItems"]:
        return where, f"must have at least {schema['minItems']} item(s)"
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        return where, f"must have at most {schema['maxItems']} item(s)"
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            if (error := first_error(items, item, root, f"{where}[{i}]")) is not None:
                return error
    return None


def _string_error(schema: Mapping[str, Any], value: str, where: str) -> tuple[str, str] | None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        return where, f"must have at least {schema['minLength']} character(s)"
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return where, f"must have at most {schema['maxLength']} character(s)"
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and re.search(pattern, value) is None:
        return where, f"must match {pattern!r}"
    return None


def _number_error(schema: Mapping[str, Any], value: float, where: str) -> tuple[str, str] | None:
    checks = (
        ("minimum", "at least", operator.lt),
        ("maximum", "at most", operator.gt),
        ("exclusiveMinimum", "more than", operator.le),
        ("exclusiveMaximum", "less than", operator.ge),
    )
    for keyword, words, broken in checks:
        bound = schema.get(keyword)
        if isinstance(bound, int | float) and not isinstance(bound, bool) and broken(value, bound):
            return where, f"must be {words} {bound}"
    return None


def _is_type(value: Any, kind: str | list[str]) -> bool:
    kinds = [kind] if isinstance(kind, str) else kind
    for name in kinds:
        if isinstance(value, bool) and name not in ("boolean",):
            continue  # JSON's true is no number
        if isinstance(value, _TYPES.get(name, object)):
            return True
    return False


def _kinds(kind: str | list[str]) -> str:
    names = [kind] if isinstance(kind, str) else kind
    return " or ".join(f"{'an' if n[0] in 'aeio' else 'a'} {n}" for n in names)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _resolved(root: Mapping[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    return _resolve(root, ref) if isinstance(ref, str) else schema


def _resolve(root: Mapping[str, Any], ref: str) -> Mapping[str, Any]:
    if not ref.startswith("#/"):
        return {}  # a remote ref: not followed, so not checked
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part, {}) if isinstance(node, Mapping) else {}
    return node if isinstance(node, Mapping) else {}
