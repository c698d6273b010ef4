"""Params checked against a pipeline's JSON Schema, each error naming the field (``params.x``).

The registry's schemas are the ones pydantic generates from a pipeline's params model
(streams.params). The checking is `jsonschema`'s (Draft 2020-12, what pydantic emits); this
module only turns its most relevant error (`best_match`) into an InvalidInput whose field is the
path into the params: ``params.metrics[0].query``. A missing required property and a property
the schema does not allow are named themselves, not their object. A ``$ref`` outside the schema
is not followed: such a schema is not checked here, and the worker's own decode stays the last
word.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match, by_relevance
from referencing.exceptions import Unresolvable

from streams.errors import InvalidInput

# Of two errors in one object, a missing required param is said before an unknown one: a typo
# (`pth` for `path`) is then told as the param the pipeline needs.
_RELEVANCE = by_relevance(strong=frozenset({"required"}))


def check_params(schema: Mapping[str, Any], params: Mapping[str, Any]) -> None:
    """Raise InvalidInput("params.<field>", why) at the part of ``params`` that ``schema``
    refuses (the most relevant error, when there are several)."""
    error = first_error(schema, params)
    if error is not None:
        raise InvalidInput(*error)


def first_error(schema: Mapping[str, Any], params: Any) -> tuple[str, str] | None:
    """(field, reason) of the most relevant error in ``params`` against ``schema``, or None
    (None too for a schema that is not valid JSON Schema, or refers outside itself)."""
    try:
        Draft202012Validator.check_schema(schema)
        errors = Draft202012Validator(schema).iter_errors(params)
        error = best_match(errors, key=_RELEVANCE)
    except (SchemaError, Unresolvable):
        return None
    if error is None:
        return None
    return _field(error), _reason(error)


def _field(error: ValidationError) -> str:
    where = "params" + "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
    )
    names = _named(error)
    return f"{where}.{names[0]}" if names else where


def _named(error: ValidationError) -> list[str]:
    """The property a `required` or `additionalProperties` error is about."""
    # Typed loosely by jsonschema (a keyword's value or Unset): what each keyword holds is JSON.
    instance, value, schema = error.instance, cast(Any, error.validator_value), error.schema
    if not isinstance(instance, Mapping) or not isinstance(schema, Mapping):
        return []
    if error.validator == "required" and isinstance(value, Iterable):
        return [name for name in value if name not in instance]
    if error.validator == "additionalProperties" and value is False:
        known = schema.get("properties", {})
        return [name for name in instance if name not in known]
    return []


def _reason(error: ValidationError) -> str:
    """Why, in the words the rest of Tidemark's errors use; jsonschema's own message for a
    keyword not worded here."""
    keyword, bound, value = error.validator, cast(Any, error.validator_value), error.instance
    if keyword == "required":
        return "is required"
    if keyword == "additionalProperties":
        return "is not a param of this pipeline"
    if keyword == "type":
        return f"must be {_kinds(bound)}, got {_shown(value)}"
    if keyword in ("anyOf", "oneOf") and all("type" in option for option in bound):
        kinds = [kind for option in bound for kind in _listed(option["type"])]
        return f"must be {_kinds(kinds)}, got {_shown(value)}"
    if keyword in _BOUNDS:
        return f"must be {_BOUNDS[keyword]} {bound}"
    if keyword in _SIZES:
        words, unit = _SIZES[keyword]
        return f"must have {words} {bound} {unit}"
    if keyword == "enum":
        return f"must be one of {', '.join(repr(v) for v in bound)}"
    if keyword == "const":
        return f"must be {bound!r}"
    if keyword == "pattern":
        return f"must match {bound!r}"
    return str(error.message)


_BOUNDS = {
    "minimum": "at least",
    "maximum": "at most",
    "exclusiveMinimum": "more than",
    "exclusiveMaximum": "less than",
}
_SIZES = {
    "minItems": ("at least", "item(s)"),
    "maxItems": ("at most", "item(s)"),
    "minLength": ("at least", "character(s)"),
    "maxLength": ("at most", "character(s)"),
    "minProperties": ("at least", "key(s)"),
    "maxProperties": ("at most", "key(s)"),
}


def _listed(kind: str | list[str]) -> list[str]:
    return [kind] if isinstance(kind, str) else list(kind)


def _kinds(kind: str | list[str]) -> str:
    names = _listed(kind)
    return " or ".join(
        n if n == "null" else f"{'an' if n[0] in 'aeio' else 'a'} {n}" for n in names
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
