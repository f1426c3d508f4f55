"""A tool is a plain Python function: its JSON Schema comes from its signature and its
description from its docstring, through pydantic.

`Tool.of` reads a function: each parameter becomes a property of an object schema (its
annotation through pydantic, so ``Literal``, ``list[...]``, pydantic models, ``Annotated``
with a ``Field(description=...)`` all work; a default makes it optional; no annotation
means any JSON value), the docstring's first paragraph is the description. The same
pydantic model validates the model's arguments before the function runs (lax: ``"3"`` for an
``int`` is taken). A parameter that cannot travel as JSON (``*args``, ``**kwargs``, a
type pydantic has no schema for) is refused in one line when the tool is given, before
any request.

`tool` overrides the name and description and marks a tool ``safe`` (run without asking in
the notebook); `Toolbox` gives the public methods of one object as tools sharing its state.
"""

from __future__ import annotations

import functools
import inspect
import re
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model
from pydantic.errors import PydanticUserError

from gatecell.wire.transport.errors import InvalidRequest, echo, first_line

__all__ = ["Tool", "tool", "Toolbox", "as_tools", "problem"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True, eq=False)
class Tool:
    """One function the model may call.

    **Parameters:** ``name`` (what the model calls it), ``description`` (what the model reads
    about it), ``parameters`` (the JSON Schema of its arguments, an object), ``function``
    (called with the validated arguments as keywords; a coroutine function is awaited),
    ``safe`` (True: the notebook runs it without asking), ``ask`` (True: asked before it
    runs even in Python, as MCP tools are), ``validator`` (a pydantic model of the arguments;
    None: the arguments go as they came, checked by whoever runs them).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any]
    safe: bool = False
    ask: bool = False
    validator: type[BaseModel] | None = field(default=None, repr=False)

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.function)

    def arguments(self, given: dict[str, Any]) -> dict[str, Any]:
        """``given`` validated against the schema, as the keywords of the call; a
        `pydantic.ValidationError` when they do not fit (see `problem`)."""
        if self.validator is None:
            return given
        checked = self.validator.model_validate(given)
        return {name: getattr(checked, name) for name in type(checked).model_fields}

    @classmethod
    def of(
        cls,
        function: Callable[..., Any],
        name: str | None = None,
        description: str | None = None,
        safe: bool = False,
    ) -> Tool:
        """The tool of ``function`` (see the module); an `InvalidRequest` naming the
        parameter that cannot be expressed."""
        if isinstance(function, Tool):
            return function
        if not callable(function):
            raise InvalidRequest("tools", f"a tool is a function; got {echo(function)}")
        name = name or getattr(function, "__name__", None) or type(function).__name__
        if not _NAME.match(name):
            raise InvalidRequest("tools", f"{name!r} is not a name a model can call (letters, digits, _ . -)")
        try:
            signature = inspect.signature(function, eval_str=True)  # string annotations resolved
        except (TypeError, ValueError):
            raise InvalidRequest("tools", f"{name}: its parameters cannot be read") from None
        except Exception as exc:  # an annotation naming what its module does not define
            raise InvalidRequest(
                "tools", f"{name}: an annotation cannot be resolved ({first_line(exc)})"
            ) from None
        fields: dict[str, Any] = {}
        for parameter in signature.parameters.values():
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD, parameter.POSITIONAL_ONLY):
                raise InvalidRequest(
                    "tools",
                    f"{name}: parameter {parameter} cannot be given by name in JSON; use plain parameters",
                )
            annotation = Any if parameter.annotation is parameter.empty else parameter.annotation
            default = ... if parameter.default is parameter.empty else parameter.default
            fields[parameter.name] = (annotation, default)
        try:
            model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
            schema = model.model_json_schema()
        except (PydanticUserError, TypeError, ValueError):
            raise InvalidRequest("tools", f"{name}: {_inexpressible(fields)}") from None
        schema.pop("title", None)
        return cls(
            name,
            description if description is not None else _summary(function),
            schema,
            function,
            safe=safe,
            validator=model,
        )


def _inexpressible(fields: dict[str, Any]) -> str:
    """Which parameter has no JSON Schema, said in one line."""
    for parameter, (annotation, _) in fields.items():
        try:
            TypeAdapter(annotation).json_schema()
        except (PydanticUserError, TypeError, ValueError):
            return f"parameter {parameter!r} ({echo(annotation)}) has no JSON Schema: give it a JSON type"
    return "its parameters have no JSON Schema"


def _summary(function: Callable[..., Any]) -> str:
    """The docstring's first paragraph, on one line."""
    doc = inspect.getdoc(function) or ""
    return " ".join(doc.strip().split("\n\n", 1)[0].split())


def tool(
    function: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    safe: bool = False,
) -> Any:
    """Mark a function as a tool with another ``name`` or ``description``, or ``safe`` (run
    in the notebook without asking): ``@gatecell.tool(safe=True)`` or ``@gatecell.tool``.
    The function stays callable as it was; the tool is made (and checked) now."""

    def mark(function: Callable[..., Any]) -> Callable[..., Any]:
        made = Tool.of(function, name, description, safe)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return function(*args, **kwargs)

        wrapper.__gatecell_tool__ = made  # type: ignore[attr-defined]
        return wrapper

    return mark(function) if function is not None else mark


class Toolbox:
    """A class whose public methods are tools sharing the object's state::

        class Orders(gatecell.Toolbox):
            def __init__(self, table): self.table = table
            def status(self, order_id: str) -> dict: ...
            def cancel(self, order_id: str) -> bool: ...

        gw.chat(..., tools=[Orders(df)])

    Each method's tool is named ``ClassName_method`` unless ``@gatecell.tool(name=...)``
    names it; ``tools()`` lists them."""

    def tools(self) -> list[Tool]:
        found = []
        prefix = type(self).__name__
        for attribute, member in inspect.getmembers(type(self), callable):
            if attribute.startswith("_") or attribute == "tools" or isinstance(member, type):
                continue
            method = getattr(self, attribute)
            marked = getattr(method, "__gatecell_tool__", None)
            if marked is not None:
                bound = Tool.of(method, marked.name, marked.description, marked.safe)
            else:
                bound = Tool.of(method, f"{prefix}_{attribute}")
            found.append(bound)
        return found


def as_tools(given: Iterable[Any]) -> list[Tool]:
    """The tools of what the user gave: functions, `Tool` values, `Toolbox` objects, lists
    of these; names must be unique. Refused in one line before any request."""
    if callable(given) or isinstance(given, Toolbox):
        given = [given]
    tools: list[Tool] = []
    for item in given:
        if isinstance(item, Toolbox):
            tools += item.tools()
        elif isinstance(item, (list, tuple)):
            tools += as_tools(item)
        elif hasattr(item, "__gatecell_tool__"):
            tools.append(item.__gatecell_tool__)
        else:
            tools.append(_made(item))
    seen: set[str] = set()
    for one in tools:
        if one.name in seen:
            raise InvalidRequest(
                "tools", f"two tools are named {one.name!r}; rename one with gatecell.tool(name=...)"
            )
        seen.add(one.name)
    return tools


# A function's tool, made once: its pydantic model costs a millisecond, and a chain is often
# asked again with the same functions (a notebook's cells, a loop over rows).
_MADE: weakref.WeakKeyDictionary[Any, Tool] = weakref.WeakKeyDictionary()


def _made(function: Any) -> Tool:
    if isinstance(function, Tool):
        return function
    try:
        made = _MADE.get(function)
    except TypeError:  # not weakly referable (a builtin): made each time
        return Tool.of(function)
    if made is None:
        made = _MADE[function] = Tool.of(function)
    return made


def problem(exc: ValidationError) -> str:
    """A validation error in one line: where, what, and how many more."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"]) or "arguments"
    line = f"{where}: {first['msg']}"
    if first["type"] != "missing" and first["loc"]:
        line += f", got {echo(first.get('input'), 80)}"
    if len(errors) > 1:
        line += f" (and {len(errors) - 1} more)"
    return line
