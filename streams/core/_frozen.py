"""A faster `__init__` for the core's frozen, slotted dataclasses (same fields, same defaults).

The one dataclasses generates sets each field through `object.__setattr__(self, name, value)`,
which looks the name up on every call; several such objects are made per input. This one calls
each slot's descriptor directly, which is about twice as fast, and changes nothing else: the
instances stay frozen, compare, hash and print as before.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def fast_init(cls: type[T]) -> type[T]:
    """Give the dataclass `cls` the faster `__init__`; put it over its `@dataclass(...)`."""
    fields = [f for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
    namespace: dict[str, Any] = {}
    params, body = ["self"], []
    for f in fields:
        if f.default_factory is not dataclasses.MISSING or getattr(cls, "__post_init__", None):
            return cls  # not needed by the core's frozen classes: keep the generated one
        setter = f"_set_{f.name}"
        namespace[setter] = cls.__dict__[f.name].__set__
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        body.append(f"    {setter}(self, {f.name})")
    source = f"def __init__({', '.join(params)}):\n" + ("\n".join(body) or "    pass")
    exec(source, namespace)  # built from the field names alone
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
