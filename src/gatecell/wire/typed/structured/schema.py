"""`Schema`: what an answer must be, made once per call or batch from what the user has at
hand (a pydantic model class, a ``TypedDict``, a JSON Schema dict, ``list[...]`` of those,
or choices: a list of labels, an ``Enum`` class, a ``Literal[...]``), and how a value is
checked against it (one line naming the first problem when it fails) and written for the log.
"""

from __future__ import annotations

import enum
import functools
import json
import re
import typing
from collections.abc import Mapping
from typing import Any, Literal

import typing_extensions
from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticUserError

from gatecell.wire.transport.errors import InvalidRequest, echo, first_line
from gatecell.wire.typed.structured.json_schema import (
    NAME,
    Kind,
    is_strict,
    kind_of,
    openapi,
    python_type,
    resolved,
    tightened,
    wrapped,
)

__all__ = ["Schema", "Kind", "WRAP", "label_key"]

# The key a non-object answer is wrapped in when the schema travels natively.
WRAP: dict[str, str] = {"list": "items", "choices": "label", "value": "value"}
_UNPARSED = re.compile(r", unable to .*$")


class Schema:
    """What an answer must be: its name, its JSON Schema, the native and strict forms, and
    how a Python value is validated. Make one with `Schema.of`.

    **Attributes:**

    * **name** - for the APIs: letters, digits, ``_`` and ``-``, at most 64 (the model or
      TypedDict class name, a JSON Schema's ``title``, ``Item_list`` for ``list[Item]``).
    * **kind** - ``"object"``, ``"list"`` (of items), ``"choices"``, or ``"value"`` (any
      other root, such as a number).
    * **json_schema** - the JSON Schema of the answer's value (what `instruction` shows).
    * **wire** - the object-rooted schema sent natively, tightened for OpenAI's strict mode:
      ``additionalProperties: false`` where unsaid, every property required, no defaults.
    * **strict** - whether ``wire`` keeps to strict mode's rules (its keywords, objects
      closed, nesting at most 10 levels); `request_fields` asks for strict mode when it does.

    * **labels** - the choices, in order (empty for other kinds).
    """

    name: str
    kind: Kind
    json_schema: dict[str, Any]
    labels: tuple[str, ...]

    def __init__(
        self,
        name: str,
        kind: Kind,
        json_schema: dict[str, Any],
        adapter: TypeAdapter[Any] | None = None,
        *,
        plain: bool = False,
        choices: tuple[tuple[str, Any], ...] = (),
    ) -> None:
        self.name = NAME.sub("_", name)[:64] or "answer"
        self.kind = kind
        self.json_schema = json_schema
        self._adapter = adapter
        self._plain = plain  # a JSON Schema dict: values are plain JSON, not Python objects
        self.labels = tuple(label for label, _ in choices)
        self._values = tuple(value for _, value in choices)
        self._by_key = {label_key(label): i for i, label in enumerate(self.labels)}
        self._label_of = {value: label for label, value in choices}
        if len(self._by_key) != len(self.labels):
            raise InvalidRequest("choices", "two labels are the same once case and spaces are ignored")
        wire = self.json_schema if kind == "object" else wrapped(self.json_schema, WRAP[kind])
        self.wire = tightened(wire)
        self.strict = is_strict(self.wire)

    # -- making one ------------------------------------------------------------------

    @classmethod
    def of(cls, spec: Any) -> Schema:
        """A `Schema` from a pydantic model class, a ``TypedDict``, a JSON Schema dict,
        ``list[...]`` of those, or choices: a list of labels, an ``Enum`` class, a
        ``Literal[...]``. What is none of these is an `InvalidRequest` in one line."""
        if isinstance(spec, Schema):
            return spec
        if isinstance(spec, (list, tuple)):
            return cls._choices("choice", [(_label(v), v) for v in spec])
        if isinstance(spec, Mapping):
            return cls._from_json_schema(dict(spec))
        if isinstance(spec, type) and issubclass(spec, enum.Enum):
            return cls._choices(spec.__name__, [(_label(m.value), m) for m in spec])
        if typing.get_origin(spec) in (Literal, typing_extensions.Literal):
            return cls._choices("choice", [(_label(v), v) for v in typing.get_args(spec)])
        return cls._from_type(spec)

    @classmethod
    def _choices(cls, name: str, choices: list[tuple[str, Any]]) -> Schema:
        if not choices:
            raise InvalidRequest("choices", "must hold at least one label")
        labels = [label for label, _ in choices]
        return cls(name, "choices", {"type": "string", "enum": labels}, choices=tuple(choices))

    @classmethod
    def _from_type(cls, spec: Any) -> Schema:
        if not (isinstance(spec, type) or typing.get_origin(spec) is not None):
            raise InvalidRequest(
                "schema",
                "must be a pydantic model class, a TypedDict, a JSON Schema dict, list[...] of those, "
                f"or choices (a list of labels, an Enum, a Literal); got {echo(spec)}",
            )
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(_pydantic_typeddict(spec))
            json_schema = adapter.json_schema()
        except (PydanticUserError, TypeError, ValueError) as exc:
            raise InvalidRequest("schema", f"pydantic cannot use {echo(spec)}: {first_line(exc)}") from None
        kind = kind_of(json_schema, json_schema)
        if typing.get_origin(spec) is list:
            (item,) = typing.get_args(spec) or (Any,)
            name = f"{getattr(item, '__name__', 'item')}_list"
        else:
            name = getattr(spec, "__name__", None) or json_schema.get("title") or "answer"
        return cls(name, kind, json_schema, adapter)

    @classmethod
    def _from_json_schema(cls, json_schema: dict[str, Any]) -> Schema:
        enum_ = json_schema.get("enum")
        if isinstance(enum_, list) and json_schema.get("type", "string") == "string":
            labels = [v for v in enum_ if isinstance(v, str)]
            if len(labels) != len(enum_):
                raise InvalidRequest("schema", "an enum of choices must hold strings only")
            return cls._choices(json_schema.get("title") or "choice", [(v, v) for v in labels])
        python = python_type(json_schema)
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(python)
        except (PydanticUserError, TypeError, ValueError) as exc:
            raise InvalidRequest("schema", f"cannot be used: {first_line(exc)}") from None
        kind = kind_of(json_schema, json_schema)
        title = json_schema.get("title")
        return cls(title if isinstance(title, str) else "answer", kind, json_schema, adapter, plain=True)

    # -- using one -------------------------------------------------------------------

    @property
    def description(self) -> str | None:
        text = self.json_schema.get("description")
        return text if isinstance(text, str) and text.strip() else None

    def check(self, value: Any) -> tuple[Any, str | None]:
        """``(validated value, None)``, or ``(None, the first problem in one line)``.

        A model class gives its instance, a ``TypedDict`` a dict, a JSON Schema dict plain
        JSON, choices the label (or the ``Enum`` member, or the ``Literal`` value) a string
        names, case, spaces, quotes and a final full stop aside (`label_key`)."""
        if self.kind == "choices":
            i = self._by_key.get(label_key(value)) if isinstance(value, str) else None
            return (None, _not_a_label(value, self)) if i is None else (self._values[i], None)
        assert self._adapter is not None
        try:
            result = self._adapter.validate_python(value)
        except ValidationError as exc:
            return None, _first_problem(exc)
        if self._plain:
            result = self._adapter.dump_python(result, mode="json", by_alias=True, exclude_unset=True)
        return result, None

    def check_json(self, text: str) -> Any:
        """The value of a JSON text that is a valid answer, parsed and validated in one step
        (the common case, made cheap); None for anything else, which `check` then names."""
        if self._adapter is None:
            return None
        try:
            result = self._adapter.validate_json(text)
        except ValidationError:
            return None
        if self._plain:
            result = self._adapter.dump_python(result, mode="json", by_alias=True, exclude_unset=True)
        return result

    def dump(self, value: Any) -> str:
        """A validated value as JSON text (for the log): a model's fields by their aliases,
        dates as ISO strings, a choice as its label."""
        if self.kind == "choices" or self._plain:  # a label, or plain JSON already
            shown = self.label(value) if self.kind == "choices" else value
            return json.dumps(shown, ensure_ascii=False, separators=(",", ":"))
        assert self._adapter is not None
        return self._adapter.dump_json(value, by_alias=True).decode()

    def logged(self, value: Any) -> str | None:
        """`dump` for the log: None for no value, or for one its schema cannot write."""
        if value is None:
            return None
        try:
            return self.dump(value)
        except ValueError:  # pydantic refused to serialise it: the log keeps no value
            return None

    def label(self, value: Any) -> str | None:
        """The label of a choice's value (None for anything else)."""
        try:
            return self._label_of.get(value)
        except TypeError:  # unhashable
            return None

    @functools.cached_property
    def openapi(self) -> dict[str, Any]:
        """``wire`` in the OpenAPI subset generate-content takes, made once: its references
        inlined, so a schema whose references fan out past ``GATECELL_SCHEMA_MAX_NODES``
        nodes is an `InvalidRequest` here (``wire`` keeps them, as strict mode takes them)."""
        return openapi(self.wire)

    @functools.cached_property
    def json_text(self) -> str:
        """The JSON Schema as compact JSON text (for the log: made once)."""
        return json.dumps(self.json_schema, ensure_ascii=False, separators=(",", ":"))

    @functools.cached_property
    def columns(self) -> list[tuple[str, dict[str, Any]]]:
        """The fields of one row of a frame, with their schemas (``$ref`` and nullable
        ``anyOf`` resolved): an object's properties, a list item's, else one ``label`` or
        ``value`` column."""
        if self.kind == "choices":
            return [("label", self.json_schema)]
        node = resolved(self.json_schema, self.json_schema)
        if self.kind == "list":
            node = resolved(node.get("items") or {}, self.json_schema)
        properties = node.get("properties")
        if isinstance(properties, dict) and properties:
            return [(str(k), resolved(v, self.json_schema)) for k, v in properties.items()]
        return [("value", node)]

    def __repr__(self) -> str:
        return f"Schema({self.name}, {self.kind})"


_EXTENSIONS_TYPEDDICT = type(typing_extensions.TypedDict("_Probe", {}))  # type: ignore[operator]


def _pydantic_typeddict(spec: Any) -> Any:
    """A ``typing.TypedDict`` (also the item of a ``list[...]``) remade with
    ``typing_extensions`` (which pydantic needs before Python 3.12), its required and
    optional keys kept; any other type as it is."""
    if typing.get_origin(spec) is list and typing.get_args(spec):
        return list[_pydantic_typeddict(typing.get_args(spec)[0])]  # type: ignore[misc]
    if not typing.is_typeddict(spec) or type(spec) is _EXTENSIONS_TYPEDDICT:
        return spec
    try:
        hints = typing.get_type_hints(spec)
    except (NameError, TypeError):
        return spec
    required = getattr(spec, "__required_keys__", frozenset(hints))
    fields = {
        key: typing_extensions.Required[hint] if key in required else typing_extensions.NotRequired[hint]
        for key, hint in hints.items()
    }
    return typing_extensions.TypedDict(spec.__name__, fields)  # type: ignore[operator]


_QUOTES = " \t\r\n\"'`*“”‘’"


def label_key(text: str) -> str:
    """A label as compared: quotes, emphasis and a final full stop or ! off, spaces
    collapsed, case folded."""
    text = text.strip(_QUOTES).rstrip(".!").strip(_QUOTES)
    return " ".join(text.split()).casefold()


def _label(value: Any) -> str:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise InvalidRequest("choices", f"each label must be a non-empty string (or a number), got {echo(value)}")


def _not_a_label(answer: Any, schema: Schema) -> str:
    shown = ", ".join(schema.labels[:12]) + (
        f" (+{len(schema.labels) - 12} more)" if len(schema.labels) > 12 else ""
    )
    return f"{echo(answer.strip() if isinstance(answer, str) else answer)} is not one of the choices: {shown}"


def _first_problem(exc: ValidationError) -> str:
    """The first problem in one line: where, what (a validator's own words without pydantic's
    "Value error, "), and the value found there (not the whole answer, for a rule on it)."""
    errors = exc.errors(include_url=False)
    err = errors[0]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
    line = f"{where or 'the answer'}: {_UNPARSED.sub('', err['msg']).removeprefix('Value error, ')}"
    if err["type"] != "missing" and where:
        line += f", got {echo(err.get('input'))}"
    if len(errors) > 1:
        more = len(errors) - 1
        line += f" (and {more} more problem{'s' if more > 1 else ''})"
    return line
