"""Typed params: a pipeline declares its task params as a pydantic model, the worker decodes them
once per task and the handler gets the model; the registry's schema is made from the same model.

A handler declares it with a ``params_model`` attribute (a pydantic ``BaseModel`` subclass) and
then takes the params as a second argument, ``handler(task, params)``; ``task.params`` stays the
raw mapping, so handlers without a model are called as they always were. ``with_typed_params``
turns a typed handler into a plain one (``(Task) -> Outcome``, sync or ``async`` as it was):
the worker runtime and the test kit call it once, at start, so the decode costs one
``model_validate`` per task and nothing for a handler without a model. Params the model refuses
become a ``bad_params`` nack naming the field, and the handler is not called.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from streams.errors import InvalidInput
from streams.handler import BAD_PARAMS, AnyHandler, Nack, Outcome, Task, handler_kind

M = TypeVar("M", bound=BaseModel)


def params_model_of(handler: object) -> type[BaseModel] | None:
    """The handler's declared ``params_model``, or None."""
    model = getattr(handler, "params_model", None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def params_schema(handler: object) -> dict[str, Any] | None:
    """The JSON Schema of the handler's params (from its model), or None if it declares none."""
    model = params_model_of(handler)
    return None if model is None else model.model_json_schema()


def decode_params(model: type[M], params: Mapping[str, Any]) -> M:
    """``params`` as ``model``; raises InvalidInput naming the first bad field (``params.x``)."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InvalidInput(_field(first["loc"]), first["msg"]) from None


def _field(loc: tuple[int | str, ...]) -> str:
    where = "params"
    for part in loc:
        where += f"[{part}]" if isinstance(part, int) else f".{part}"
    return where


def with_typed_params(handler: AnyHandler) -> AnyHandler:
    """``handler`` itself if it declares no ``params_model``; else a handler of the same kind
    that decodes each task's params and calls ``handler(task, params)``."""
    model = params_model_of(handler)
    if model is None:
        return handler
    call: Any = handler
    wrapper: Any
    if handler_kind(handler) == "coroutine":

        async def wrapper(task: Task) -> Outcome:
            try:
                params = decode_params(model, task.params)
            except InvalidInput as exc:
                return Nack(BAD_PARAMS, str(exc))
            return await call(task, params)  # type: ignore[no-any-return]

    else:

        def wrapper(task: Task) -> Outcome:
            try:
                params = decode_params(model, task.params)
            except InvalidInput as exc:
                return Nack(BAD_PARAMS, str(exc))
            return call(task, params)  # type: ignore[no-any-return]

    functools.update_wrapper(wrapper, handler, assigned=(), updated=())
    wrapper.params_model = model
    for name in ("close", "aclose"):  # what the worker and the test kit close at the end
        method = getattr(handler, name, None)
        if callable(method):
            setattr(wrapper, name, method)
    return wrapper  # type: ignore[no-any-return]
