"""Typed answers, sans-IO: a schema in; the API's own field, or an instruction, out; the
reply's value found, validated, and its first problem named in one line.

A `Schema` is made once per call or batch (`Schema.of`) from what the user has at hand: a
pydantic model class, a ``TypedDict``, a JSON Schema dict, ``list[...]`` of those, or
choices (a list of labels, an ``Enum`` class, a ``Literal[...]``). Everything after that is
a pure function, so that the client, the batch engine, the magics and the local gateway
share one reading of it:

- `request_fields` is the API's native form (WIRE-NOTES "Structured output"): chat
  ``response_format``, responses ``text.format``, generate-content ``generationConfig``
  (in the OpenAPI subset Gemini takes), messages a forced tool. The schema sent there has an
  object at its root, as OpenAI's strict mode and Anthropic's tools require: a list travels
  as ``{"items": [...]}``, choices as ``{"label": ...}``, another value as
  ``{"value": ...}``, and `parse` takes the value out again.
- `Support` decides which of the two a model gets: the client's say (``structured=``), the
  gateway's metadata (LiteLLM ``/model/info``), and refusals remembered per model.
- `instruction` asks the same in words, for a gateway that takes no such field. It begins
  with fixed sentences (`JSON_MARKER`, `CHOICES_MARKER`) that the local gateway's stand-in
  recognises through `instructed`, so the two cannot drift apart.
- `parse` reads an answer as real models write it: clean JSON, JSON in a code fence or with
  a sentence around it, a label in quotes or with a full stop. A failure is one line naming
  the first problem (``stars: Input should be a valid integer, got 'five'``), for the row's
  error and for `repair_message`. Its cost is linear in the answer, whatever the answer.

Nothing here sends, logs or imports pandas: the client decides native or instruction, and
`gatecell.batch.frame` turns the values into columns.
"""

from __future__ import annotations

import copy
import enum
import functools
import json
import re
import typing
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal, NamedTuple, Union

import typing_extensions
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.errors import PydanticUserError

from .errors import APIError, InvalidRequest

__all__ = [
    "Schema",
    "Support",
    "MODES",
    "Instruction",
    "JSON_MARKER",
    "CHOICES_MARKER",
    "request_fields",
    "merged",
    "instruction",
    "instructed",
    "parse",
    "parse_reply",
    "repair_message",
    "openapi",
]

Kind = Literal["object", "list", "choices", "value"]

# The key a non-object answer is wrapped in when the schema travels natively.
WRAP: dict[str, str] = {"list": "items", "choices": "label", "value": "value"}

# The instruction's fixed sentences: `instruction` writes them, `instructed` finds them.
JSON_MARKER = "Answer with JSON only"
CHOICES_MARKER = "Answer with exactly one of these labels"
_JSON_LEAD = (
    f"{JSON_MARKER}: no code fence, no text before or after it. It must validate against this JSON Schema:"
)
_CHOICES_LEAD = f"{CHOICES_MARKER}, and nothing else:"

# OpenAI strict mode: the keywords it takes, and its limits on nesting and size.
_STRICT_KEYWORDS = frozenset(
    "type properties required additionalProperties items enum const anyOf $ref $defs definitions "
    "description title pattern format multipleOf maximum exclusiveMaximum minimum exclusiveMinimum "
    "minItems maxItems".split()
)
_STRICT_DEPTH = 10
_STRICT_PROPERTIES = 5000
# Gemini's responseSchema (an OpenAPI subset): the keywords kept, and the formats it knows.
_OPENAPI_KEYWORDS = ("description", "nullable", "enum", "minItems", "maxItems", "minimum", "maximum")
_OPENAPI_FORMATS = {
    "STRING": {"date-time", "enum"},
    "INTEGER": {"int32", "int64"},
    "NUMBER": {"float", "double"},
}
_MAX_DEPTH = 64  # of a JSON Schema given as a dict
_MAX_CANDIDATES = 16  # JSON texts tried in one answer
_NAME = re.compile(r"[^A-Za-z0-9_-]")
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
        self.name = _NAME.sub("_", name)[:64] or "answer"
        self.kind = kind
        self.json_schema = json_schema
        self._adapter = adapter
        self._plain = plain  # a JSON Schema dict: values are plain JSON, not Python objects
        self.labels = tuple(label for label, _ in choices)
        self._values = tuple(value for _, value in choices)
        self._by_key = {_label_key(label): i for i, label in enumerate(self.labels)}
        self._label_of = {value: label for label, value in choices}
        if len(self._by_key) != len(self.labels):
            raise InvalidRequest("choices", "two labels are the same once case and spaces are ignored")
        wire = self.json_schema if kind == "object" else _wrapped(self.json_schema, WRAP[kind])
        self.wire = _tightened(wire)
        self.strict = _is_strict(self.wire)

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
                f"or choices (a list of labels, an Enum, a Literal); got {_short(spec)}",
            )
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(_pydantic_typeddict(spec))
            json_schema = adapter.json_schema()
        except (PydanticUserError, TypeError, ValueError) as exc:
            raise InvalidRequest(
                "schema", f"pydantic cannot use {_short(spec)}: {_first_line(exc)}"
            ) from None
        kind = _kind_of(json_schema, json_schema)
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
        python = _Typer(json_schema).type_of(json_schema, 0, "Answer")
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(python)
        except (PydanticUserError, TypeError, ValueError) as exc:
            raise InvalidRequest("schema", f"cannot be used: {_first_line(exc)}") from None
        kind = _kind_of(json_schema, json_schema)
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
        JSON, choices the label (or the ``Enum`` member, or the ``Literal`` value)."""
        if self.kind == "choices":
            return self._choose(value) if isinstance(value, str) else (None, _not_a_label(value, self))
        assert self._adapter is not None
        try:
            result = self._adapter.validate_python(value)
        except ValidationError as exc:
            return None, _first_problem(exc)
        if self._plain:
            result = self._adapter.dump_python(result, mode="json", by_alias=True, exclude_unset=True)
        return result, None

    def dump(self, value: Any) -> str:
        """A validated value as JSON text (for the log): a model's fields by their aliases,
        dates as ISO strings, a choice as its label."""
        if self.kind == "choices" or self._plain:  # a label, or plain JSON already
            shown = self.label(value) if self.kind == "choices" else value
            return json.dumps(shown, ensure_ascii=False, separators=(",", ":"))
        assert self._adapter is not None
        return self._adapter.dump_json(value, by_alias=True).decode()

    def label(self, value: Any) -> str | None:
        """The label of a choice's value (None for anything else)."""
        try:
            return self._label_of.get(value)
        except TypeError:  # unhashable
            return None

    @functools.cached_property
    def columns(self) -> list[tuple[str, dict[str, Any]]]:
        """The fields of one row of a frame, with their schemas (``$ref`` and nullable
        ``anyOf`` resolved): an object's properties, a list item's, else one ``label`` or
        ``value`` column."""
        if self.kind == "choices":
            return [("label", self.json_schema)]
        node = _resolved(self.json_schema, self.json_schema)
        if self.kind == "list":
            node = _resolved(node.get("items") or {}, self.json_schema)
        properties = node.get("properties")
        if isinstance(properties, dict) and properties:
            return [(str(k), _resolved(v, self.json_schema)) for k, v in properties.items()]
        return [("value", node)]

    def _choose(self, text: str) -> tuple[Any, str | None]:
        """The choice an answer names: case and spaces ignored, quotes, a fence, a full stop
        or a one-key JSON object around it allowed; anything else fails."""
        if not text.strip():
            return None, "the answer is empty"
        for candidate in _label_candidates(text):
            i = self._by_key.get(_label_key(candidate))
            if i is not None:
                return self._values[i], None
        return None, _not_a_label(text, self)

    def __repr__(self) -> str:
        return f"Schema({self.name}, {self.kind})"


# -- JSON Schema given as a dict: a Python type pydantic validates -----------------------


class _Typer:
    """Turns a JSON Schema into a type for a `TypeAdapter`, so that a schema given as a dict
    is validated (and its problems named) exactly as a model class is. It covers what
    answers use: types, properties and required, items, enum and const, anyOf/oneOf, the
    common bounds, ``$ref`` into the same document; other keywords are not checked."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Any] = {}
        self.models = 0

    def type_of(self, node: Any, depth: int, hint: str) -> Any:
        if depth > _MAX_DEPTH:
            raise InvalidRequest("schema", f"is nested more than {_MAX_DEPTH} levels deep")
        if node is True or node == {}:
            return Any
        if not isinstance(node, dict):
            raise InvalidRequest("schema", f"a subschema must be an object, got {_short(node)}")
        if "$ref" in node:
            return self._ref(node["$ref"], depth)
        if "const" in node:
            return _literal([node["const"]])
        if isinstance(node.get("enum"), list):
            return _literal(node["enum"])
        for key in ("anyOf", "oneOf"):
            if isinstance(node.get(key), list) and node[key]:
                return _union([self.type_of(v, depth + 1, hint) for v in node[key]])
        if isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
            return self.type_of(node["allOf"][0], depth + 1, hint)
        kind = node.get("type")
        if kind is None:
            kind = "object" if "properties" in node else "array" if "items" in node else None
        if isinstance(kind, list):
            python = _union([self.type_of({**node, "type": k}, depth + 1, hint) for k in kind])
        elif kind is None:
            return Any
        else:
            python = self._typed(node, str(kind), depth, hint)
        return Union[python, None] if node.get("nullable") is True else python  # noqa: UP007

    def _typed(self, node: dict[str, Any], kind: str, depth: int, hint: str) -> Any:
        if kind == "object":
            return self._object(node, depth, hint)
        if kind == "array":
            python: Any = list[self.type_of(node.get("items", {}), depth + 1, f"{hint}Item")]  # type: ignore[misc]
        elif kind in _SCALARS:
            python = _SCALARS[kind]
        else:
            raise InvalidRequest("schema", f"unknown type {_short(kind)}")
        bounds = {field: node[key] for key, field in _BOUNDS.get(kind, ()) if key in node}
        return Annotated[python, Field(**bounds)] if bounds else python

    def _object(self, node: dict[str, Any], depth: int, hint: str) -> Any:
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        if not isinstance(properties, dict) or not properties:
            values = self.type_of(extra, depth + 1, hint) if isinstance(extra, dict) else Any
            return dict[str, values]  # type: ignore[valid-type]
        required = set(node.get("required") or ())
        fields: dict[str, Any] = {}
        for i, (key, sub) in enumerate(properties.items()):
            python = self.type_of(sub, depth + 1, _NAME.sub("", str(key)).title() or hint)
            default = ... if key in required else None
            fields[f"f{i}"] = (python, Field(default, alias=str(key)))
        self.models += 1
        config = ConfigDict(extra="forbid" if extra is False else "allow", populate_by_name=False)
        name = _NAME.sub("", node.get("title") or hint) or "Answer"
        return create_model(name.replace("-", "_"), __config__=config, **fields)

    def _ref(self, ref: Any, depth: int) -> Any:
        if not isinstance(ref, str):
            raise InvalidRequest("schema", f"$ref must be a string, got {_short(ref)}")
        if ref in self.refs:
            return self.refs[ref] or Any  # None while it is being made: a recursive schema
        self.refs[ref] = None
        target = _pointer(self.root, ref)
        self.refs[ref] = made = self.type_of(target, depth + 1, ref.rsplit("/", 1)[-1])
        return made


_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": None}
_NUMBER_BOUNDS = (
    ("minimum", "ge"),
    ("maximum", "le"),
    ("exclusiveMinimum", "gt"),
    ("exclusiveMaximum", "lt"),
    ("multipleOf", "multiple_of"),
)
# The bounds checked, by type: (JSON Schema keyword, pydantic `Field` argument).
_BOUNDS: dict[str, tuple[tuple[str, str], ...]] = {
    "integer": _NUMBER_BOUNDS,
    "number": _NUMBER_BOUNDS,
    "string": (("minLength", "min_length"), ("maxLength", "max_length"), ("pattern", "pattern")),
    "array": (("minItems", "min_length"), ("maxItems", "max_length")),
}


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


def _literal(values: list[Any]) -> Any:
    if not values or not all(v is None or isinstance(v, (str, int, float, bool)) for v in values):
        return Any
    return Literal.__getitem__(tuple(values))


def _union(types: list[Any]) -> Any:
    return types[0] if len(types) == 1 else Union.__getitem__(tuple(types))


def _pointer(root: dict[str, Any], ref: str) -> Any:
    """The node a local ``$ref`` (``#/$defs/Name``) points at."""
    if not ref.startswith("#"):
        raise InvalidRequest("schema", f"only local $refs (#/...) are followed, got {_short(ref)}")
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise InvalidRequest("schema", f"$ref {_short(ref)} points at nothing")
    return node


def _resolved(node: Any, root: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """`node` with its ``$ref`` followed, a lone ``allOf`` opened and a nullable ``anyOf``
    reduced to its other member (a frame's columns are nullable anyway)."""
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return {}
    if isinstance(node.get("$ref"), str):
        try:
            target = _pointer(root, node["$ref"])
        except InvalidRequest:
            return {}
        extra = {k: v for k, v in node.items() if k != "$ref"}
        return _resolved({**target, **extra} if isinstance(target, dict) else {}, root, depth + 1)
    if isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
        return _resolved(node["allOf"][0], root, depth + 1)
    options = node.get("anyOf") or node.get("oneOf")
    if isinstance(options, list):
        real = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
        if len(real) == 1:
            return _resolved(real[0], root, depth + 1)
    if isinstance(node.get("type"), list):
        real = [t for t in node["type"] if t != "null"]
        if len(real) == 1:
            return {**node, "type": real[0]}
    return node


def _kind_of(node: dict[str, Any], root: dict[str, Any]) -> Kind:
    resolved = _resolved(node, root)
    kind = resolved.get("type")
    if kind == "object" or (kind is None and "properties" in resolved):
        return "object"
    if kind == "array" or (kind is None and "items" in resolved):
        return "list"
    return "value"


# -- the native forms ------------------------------------------------------------------


def _wrapped(json_schema: dict[str, Any], key: str) -> dict[str, Any]:
    """An object holding the value under `key`; the definitions move up to the new root, so
    that their ``#/$defs/...`` references still resolve."""
    inner = {k: v for k, v in json_schema.items() if k not in ("$defs", "definitions", "$schema")}
    outer: dict[str, Any] = {
        "type": "object",
        "properties": {key: inner},
        "required": [key],
        "additionalProperties": False,
    }
    for defs in ("$defs", "definitions"):
        if defs in json_schema:
            outer[defs] = json_schema[defs]
    return outer


def _tightened(json_schema: dict[str, Any]) -> dict[str, Any]:
    """A copy in strict mode's form: objects closed where they did not say, every property
    required, defaults gone, a ``$ref`` with other keywords beside it inlined."""
    root = copy.deepcopy(json_schema)

    def walk(node: Any, depth: int) -> Any:
        if not isinstance(node, dict) or depth > _MAX_DEPTH:
            return node
        if isinstance(node.get("$ref"), str) and len(node) > 1:
            try:
                target = _pointer(root, node["$ref"])
            except InvalidRequest:
                target = {}
            node = {**copy.deepcopy(target), **{k: v for k, v in node.items() if k != "$ref"}}
        node.pop("default", None)
        for defs in ("$defs", "definitions"):
            if isinstance(node.get(defs), dict):
                node[defs] = {k: walk(v, depth + 1) for k, v in node[defs].items()}
        if isinstance(node.get("properties"), dict):
            node.setdefault("additionalProperties", False)
            node["properties"] = {k: walk(v, depth + 1) for k, v in node["properties"].items()}
            node["required"] = list(node["properties"])
        if isinstance(node.get("items"), dict):
            node["items"] = walk(node["items"], depth + 1)
        for key in ("anyOf", "allOf", "oneOf", "prefixItems"):
            if isinstance(node.get(key), list):
                node[key] = [walk(v, depth + 1) for v in node[key]]
        return node

    return walk(root, 0)


def _is_strict(wire: dict[str, Any]) -> bool:
    """Whether OpenAI's strict mode takes `wire` (its documented subset and limits)."""
    count = 0
    stack: list[tuple[Any, int]] = [(wire, 0)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict) or depth > _STRICT_DEPTH or not node.keys() <= _STRICT_KEYWORDS:
            return False
        if node.get("type") == "object" or "properties" in node:
            if node.get("additionalProperties") is not False:
                return False
            count += len(node.get("properties") or ())
        children = [*(node.get("properties") or {}).values(), *(node.get("anyOf") or ())]
        stack.extend((child, depth + 1) for child in children)
        if "items" in node:
            stack.append((node["items"], depth + 1))
        for defs in ("$defs", "definitions"):
            stack.extend((child, depth + 1) for child in (node.get(defs) or {}).values())
    return count <= _STRICT_PROPERTIES and "anyOf" not in wire


def openapi(json_schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema in the OpenAPI subset of Gemini's ``responseSchema``: references
    inlined (a recursive one is left out), upper-case types, ``nullable`` for a null
    alternative, only the keywords and formats it takes, ``propertyOrdering`` kept."""

    def convert(node: Any, refs: tuple[str, ...]) -> dict[str, Any] | None:
        if not isinstance(node, dict) or len(refs) > _MAX_DEPTH:
            return None
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in refs:
                return None
            try:
                target = _pointer(json_schema, ref)
            except InvalidRequest:
                return None
            merged_node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return convert(merged_node, (*refs, ref))
        if isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
            return convert({**node["allOf"][0], **{k: v for k, v in node.items() if k != "allOf"}}, refs)
        options = node.get("anyOf") or node.get("oneOf")
        kind = node.get("type")
        nullable = False
        if isinstance(options, list):
            real = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            nullable = len(real) < len(options)
            if len(real) == 1:
                described = {"description": node["description"]} if "description" in node else {}
                inner = convert({**real[0], **described}, refs)
                return {**inner, "nullable": True} if inner is not None and nullable else inner
            converted = [c for c in (convert(o, refs) for o in real) if c is not None]
            out: dict[str, Any] = {"anyOf": converted}
            return {**out, "nullable": True} if nullable else out
        if isinstance(kind, list):
            real_kinds = [k for k in kind if k != "null"]
            nullable = len(real_kinds) < len(kind)
            kind = real_kinds[0] if real_kinds else "string"
        if "const" in node:
            node = {**node, "enum": [node["const"]]}
        if kind is None:
            kind = "object" if "properties" in node else "array" if "items" in node else "string"
        out = {"type": str(kind).upper()}
        for key in _OPENAPI_KEYWORDS:
            if node.get(key) is not None:
                out[key] = node[key]
        if "enum" in out and not all(isinstance(v, str) for v in out["enum"]):
            del out["enum"]  # Gemini takes enums of strings only; the value is still validated here
        if nullable:
            out["nullable"] = True
        if node.get("format") in _OPENAPI_FORMATS.get(out["type"], ()):
            out["format"] = node["format"]
        if out["type"] == "OBJECT" and isinstance(node.get("properties"), dict):
            properties = {}
            for key, sub in node["properties"].items():
                inner = convert(sub, refs)
                if inner is not None:
                    properties[key] = inner
            out["properties"] = properties
            out["required"] = [k for k in node.get("required") or () if k in properties]
            out["propertyOrdering"] = list(properties)
        if out["type"] == "ARRAY":
            items = convert(node.get("items") or {"type": "string"}, refs)
            if items is None:
                return None
            out["items"] = items
        return out

    return convert(json_schema, ()) or {"type": "OBJECT"}


def request_fields(api: str, schema: Schema) -> dict[str, Any]:
    """The body fields asking ``api`` (``chat``, ``responses``, ``generate-content``,
    ``messages``) for `schema` natively; add them with `merged`."""
    if api in ("chat", "responses"):
        spec: dict[str, Any] = {"name": schema.name, "schema": schema.wire, "strict": schema.strict}
        if schema.description:
            spec["description"] = schema.description
        if api == "chat":
            return {"response_format": {"type": "json_schema", "json_schema": spec}}
        return {"text": {"format": {"type": "json_schema", **spec}}}
    if api == "generate-content":
        return {
            "generationConfig": {
                "responseMimeType": "application/json",
                "responseSchema": openapi(schema.wire),
            }
        }
    if api == "messages":
        tool = {
            "name": schema.name,
            "description": schema.description or f"Give the answer as {schema.name}.",
            "input_schema": schema.wire,
        }
        return {"tools": [tool], "tool_choice": {"type": "tool", "name": schema.name}}
    raise InvalidRequest("api", f"must be one of chat, messages, generate-content, responses; got {api!r}")


def merged(arguments: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """`arguments` with `fields` added; a field both hold as objects (``generationConfig``
    with the sampling options in it) is merged, the new keys winning."""
    out = dict(arguments)
    for key, value in fields.items():
        if isinstance(out.get(key), Mapping) and isinstance(value, Mapping):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


# -- native or instruction ---------------------------------------------------------------

MODES = ("auto", "native", "instruction")
# A gateway's 4xx naming a native field: it does not take typed answers that way.
_REFUSAL = re.compile(
    r"response_format|json_schema|text\.format|response_?(?:json_?)?schema|response_?mime_?type"
    r"|generation_?config|tool_choice|\btools\b|structured output",
    re.IGNORECASE,
)


class Support:
    """Which models take a schema in the API's native field, and which get the instruction.

    ``mode`` ``"native"`` sends the field to every model, ``"instruction"`` to none, and
    ``"auto"`` (the default) to the models the gateway's metadata says take it (`learn`:
    LiteLLM's ``GET /model/info``, ``supports_response_schema``). Whatever the mode, a model
    whose gateway refused the field (`is_refusal`, then `refused`) gets the instruction from
    then on, as `routing.Router` remembers reasoning models.

    **Parameters:**

    * **mode** - ``"auto"``, ``"native"`` or ``"instruction"``.
    """

    def __init__(self, mode: str = "auto") -> None:
        if mode not in MODES:
            raise InvalidRequest("structured", f"must be one of {', '.join(MODES)}; got {mode!r}")
        self.mode = mode
        self._known: dict[str, bool] = {}  # model -> takes the native field, from the metadata
        self._refused: set[str] = set()  # models whose gateway refused it

    def native(self, model: str) -> bool:
        """Whether to ask `model` in the native field."""
        if self.mode == "instruction" or model in self._refused:
            return False
        return self.mode == "native" or self._known.get(model, False)

    def learn(self, model_info: Any) -> None:
        """Take what LiteLLM's ``/model/info`` body says: ``data[].model_name`` and its
        ``model_info.supports_response_schema``. A name served by several deployments takes
        the field only if all of them say so; an entry that does not say is left unknown."""
        entries = model_info.get("data") if isinstance(model_info, dict) else None
        for entry in entries if isinstance(entries, list) else ():
            name = entry.get("model_name") if isinstance(entry, dict) else None
            info = entry.get("model_info") if isinstance(entry, dict) else None
            says = info.get("supports_response_schema") if isinstance(info, dict) else None
            if isinstance(name, str) and isinstance(says, bool):
                self._known[name] = self._known.get(name, True) and says

    def refused(self, model: str) -> None:
        """Remember that `model`'s gateway refused the native field."""
        self._refused.add(model)

    @staticmethod
    def is_refusal(error: APIError) -> bool:
        """A 4xx naming the native field (``response_format``, ``responseSchema``, ``tools``...)."""
        return error.status in (400, 404, 415, 422) and bool(_REFUSAL.search(error.message or ""))


# -- the instruction -------------------------------------------------------------------


class Instruction(NamedTuple):
    """An instruction found in a prompt: the text before it, and what it asks for."""

    prompt: str
    json_schema: dict[str, Any] | None  # None when it asks for one of `labels`
    labels: tuple[str, ...]


def instruction(schema: Schema) -> str:
    """The words asking for `schema` when the gateway takes no native field: the JSON
    Schema to validate against, or the labels to pick one of. Added after the prompt."""
    if schema.kind == "choices":
        labels = ", ".join(json.dumps(label, ensure_ascii=False) for label in schema.labels)
        return f"{_CHOICES_LEAD} {labels}"
    return f"{_JSON_LEAD}\n{json.dumps(schema.json_schema, ensure_ascii=False)}"


def instructed(text: str) -> Instruction | None:
    """The `instruction` in `text` (the last one), or None when it holds none."""
    at_json, at_choices = text.rfind(_JSON_LEAD), text.rfind(_CHOICES_LEAD)
    if at_json < 0 and at_choices < 0:
        return None
    if at_json > at_choices:
        start = at_json + len(_JSON_LEAD)
        start += len(text[start:]) - len(text[start:].lstrip())
        try:
            found, _ = json.JSONDecoder().raw_decode(text, start)
        except (ValueError, RecursionError):
            return None
        return Instruction(text[:at_json].rstrip(), found, ()) if isinstance(found, dict) else None
    line = text[at_choices + len(_CHOICES_LEAD) :].split("\n", 1)[0]
    try:
        labels = json.loads(f"[{line}]")
    except (ValueError, RecursionError):
        return None
    if not labels or not all(isinstance(label, str) for label in labels):
        return None
    return Instruction(text[:at_choices].rstrip(), None, tuple(labels))


def repair_message(answer: str, error: str, schema: Schema | None = None) -> str:
    """The user turn of the repair round: what was wrong, the answer it was wrong in, and
    (with `schema`) the instruction again."""
    shown = answer.strip()
    if len(shown) > 4000:
        shown = shown[:4000] + " …"
    lines = [
        f"Your answer did not validate: {error}.",
        f"Your answer was:\n{shown}" if shown else "Your answer was empty.",
        "Answer again, correcting that.",
    ]
    if schema is not None:
        lines.append(instruction(schema))
    return "\n\n".join(lines)


# -- reading an answer -----------------------------------------------------------------


def parse(text: str | None, schema: Schema) -> tuple[Any, str | None]:
    """``(value, None)`` for an answer that holds a valid value, else ``(None, one line)``.

    The JSON may be the whole answer, inside a code fence, or a balanced object or array
    with text around it; each is tried (the first that validates wins, else the first
    problem found is named). A JSON value the answer ends inside (a cut-off reply) fails.
    Choices match a label case- and space-insensitively, also quoted or with a full stop.
    """
    if text is None or not text.strip():
        return None, "the answer is empty"
    if schema.kind == "choices":
        return schema._choose(text)
    problem: str | None = None
    syntax: str | None = None
    cut = False
    tried = 0
    for candidate in _json_candidates(text):
        if candidate is None:
            cut = True
            continue
        tried += 1
        if tried > _MAX_CANDIDATES:
            break
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError) as exc:
            if syntax is None and candidate[:1] in "{[":
                syntax = f"the JSON does not parse: {str(exc)[:120]}"
            continue
        value, error = schema.check(_unwrap(value, schema))
        if error is None:
            return value, None
        problem = problem or error
    if problem is not None:
        return None, problem
    if cut:
        return None, "the JSON is cut off: the answer ends inside it"
    return None, syntax or "no JSON value in the answer"


def parse_reply(body: Any, text: str | None, schema: Schema) -> tuple[Any, str | None]:
    """`parse` for a whole reply: a messages reply's forced tool call (``tool_use``, named
    after the schema) is the value itself; a chat refusal is named; else `text` is parsed."""
    if isinstance(body, dict):
        content = body.get("content")
        if body.get("type") == "message" and isinstance(content, list):
            for block in content:
                if (
                    isinstance(block, dict)
                    and block.get("type") == "tool_use"
                    and block.get("name") == schema.name
                ):
                    return schema.check(_unwrap(block.get("input"), schema))
        choices = body.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            message = choices[0].get("message")
            refusal = message.get("refusal") if isinstance(message, dict) else None
            if isinstance(refusal, str) and refusal.strip():
                return None, f"the model refused: {_short(refusal.strip(), 200)}"
    return parse(text, schema)


def _unwrap(value: Any, schema: Schema) -> Any:
    """The value out of its native wrapping (``{"items": [...]}``...), when it is wrapped."""
    key = WRAP.get(schema.kind)
    if key is not None and isinstance(value, dict) and len(value) == 1 and key in value:
        return value[key]
    return value


def _json_candidates(text: str) -> Iterator[str | None]:
    """The texts that may be the answer's JSON, in order: the whole answer, each fenced
    block, each balanced top-level object or array; None marks one the answer ends inside.
    Every step moves forward, so the whole walk is linear in the answer."""
    whole = text.strip()
    if whole[:1] in '{["' or whole[:1].isdigit() or whole in ("true", "false", "null"):
        yield whole
    yield from _fenced(text)
    i = 0
    following = {"{": text.find("{"), "[": text.find("[")}
    while True:
        for opener, at in following.items():
            if 0 <= at < i:  # searched again only once passed: every search moves forward
                following[opener] = text.find(opener, i)
        starts = [at for at in following.values() if at >= 0]
        if not starts:
            return
        start = min(starts)
        end = _closing(text, start)
        if end is None:  # the answer ends inside it
            yield None
            return
        if end < 0:  # a bracket that does not match: not JSON; go on after it
            i = -end
            continue
        yield text[start:end]
        i = end


def _fenced(text: str) -> Iterator[str]:
    """The bodies of the ``` code blocks, the info string (``json``) dropped."""
    i = 0
    while True:
        open_at = text.find("```", i)
        if open_at < 0:
            return
        body_at = text.find("\n", open_at)
        if body_at < 0:
            return
        close_at = text.find("```", body_at)
        if close_at < 0:
            return
        yield text[body_at + 1 : close_at].strip()
        i = close_at + 3


_CLOSERS = {"{": "}", "[": "]"}


def _closing(text: str, start: int) -> int | None:
    """The end of the balanced value opening at `start`; None when the text ends first, or
    minus the position after a bracket that does not match."""
    expected: list[str] = []
    i, n = start, len(text)
    in_string = False
    while i < n:
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in _CLOSERS:
            expected.append(_CLOSERS[ch])
        elif ch in "}]":
            if expected.pop() != ch:
                return -(i + 1)
            if not expected:
                return i + 1
        i += 1
    return None


def _label_candidates(text: str) -> Iterator[str]:
    """The answer as given, out of a code fence, and out of JSON (a string, or an object
    with one string value, such as the native ``{"label": ...}``)."""
    whole = text.strip()
    yield whole
    inner = next(_fenced(whole), whole) if whole.startswith("```") else whole
    if inner != whole:
        yield inner
    if inner[:1] in '{"':
        try:
            value = json.loads(inner)
        except (ValueError, RecursionError):
            return
        if isinstance(value, dict) and len(value) == 1:
            value = next(iter(value.values()))
        if isinstance(value, str):
            yield value


_QUOTES = " \t\r\n\"'`*“”‘’"


def _label_key(text: str) -> str:
    """A label as compared: quotes, emphasis and a final full stop or ! off, spaces
    collapsed, case folded."""
    text = text.strip(_QUOTES).rstrip(".!").strip(_QUOTES)
    return " ".join(text.split()).casefold()


def _label(value: Any) -> str:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise InvalidRequest(
        "choices", f"each label must be a non-empty string (or a number), got {_short(value)}"
    )


def _not_a_label(answer: Any, schema: Schema) -> str:
    shown = ", ".join(schema.labels[:12]) + (
        f" (+{len(schema.labels) - 12} more)" if len(schema.labels) > 12 else ""
    )
    return (
        f"{_short(answer.strip() if isinstance(answer, str) else answer)} is not one of the choices: {shown}"
    )


def _first_problem(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    err = errors[0]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
    line = f"{where or 'the answer'}: {_UNPARSED.sub('', err['msg'])}"
    if err["type"] != "missing":
        line += f", got {_short(err.get('input'))}"
    if len(errors) > 1:
        more = len(errors) - 1
        line += f" (and {more} more problem{'s' if more > 1 else ''})"
    return line


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _short(value: Any, limit: int = 60) -> str:
    text = getattr(value, "__qualname__", None) if isinstance(value, type) else None
    text = text or " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
