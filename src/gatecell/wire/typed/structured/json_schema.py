"""JSON Schema documents, as typed answers use them: references followed, a schema given as
a dict turned into a Python type pydantic validates, and the two forms sent to the APIs (the
object-rooted form tightened for OpenAI's strict mode, and Gemini's OpenAPI subset).

Everything here is a pure function of a document a user (or a network) gave, so each walk
is bounded: at most `MAX_DEPTH` levels, references only into the same document, a recursive
reference left out where a form cannot express it, and at most `max_nodes` nodes made by a
form that inlines references (`tightened`, `openapi`): references that fan out (each
definition naming the next twice) double the inlined schema at each step, so that 4 KB
would make billions of nodes; past the cap the schema is refused in one line.
"""

from __future__ import annotations

import copy
import re
from typing import Annotated, Any, Literal, Union

from pydantic import ConfigDict, Field, create_model

from gatecell.wire.transport.errors import InvalidRequest, echo
from gatecell.wire.transport.settings import env_number

__all__ = [
    "Kind",
    "MAX_DEPTH",
    "MAX_NODES",
    "max_nodes",
    "NAME",
    "python_type",
    "pointer",
    "resolved",
    "kind_of",
    "wrapped",
    "tightened",
    "is_strict",
    "openapi",
]

Kind = Literal["object", "list", "choices", "value"]

MAX_DEPTH = 64  # of a JSON Schema given as a dict
MAX_NODES = 10_000
"""Nodes a form with its references inlined may have, by default (``GATECELL_SCHEMA_MAX_NODES``):
a schema with a hundred properties on each of ten levels is far below it."""
NAME = re.compile(r"[^A-Za-z0-9_-]")  # what a name sent to the APIs may not hold

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


def max_nodes() -> int:
    """The nodes an inlined form may have (``GATECELL_SCHEMA_MAX_NODES``, `MAX_NODES`)."""
    return env_number(None, "GATECELL_SCHEMA_MAX_NODES", MAX_NODES)


class _Budget:
    """Counts the nodes a form makes; the one-line refusal once they pass `max_nodes`."""

    def __init__(self) -> None:
        self.left = self.cap = max_nodes()

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise InvalidRequest(
                "schema",
                f"its $refs fan out: inlined, it passes {self.cap:,} nodes (GATECELL_SCHEMA_MAX_NODES); "
                "refer to a definition from fewer places, or nest less",
            )


def python_type(json_schema: dict[str, Any]) -> Any:
    """The Python type validating what `json_schema` describes (see `_Typer`)."""
    return _Typer(json_schema).type_of(json_schema, 0, "Answer")


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
        if depth > MAX_DEPTH:
            raise InvalidRequest("schema", f"is nested more than {MAX_DEPTH} levels deep")
        if node is True or node == {}:
            return Any
        if not isinstance(node, dict):
            raise InvalidRequest("schema", f"a subschema must be an object, got {echo(node)}")
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
            raise InvalidRequest("schema", f"unknown type {echo(kind)}")
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
            python = self.type_of(sub, depth + 1, NAME.sub("", str(key)).title() or hint)
            default = ... if key in required else None
            fields[f"f{i}"] = (python, Field(default, alias=str(key)))
        self.models += 1
        config = ConfigDict(extra="forbid" if extra is False else "allow", populate_by_name=False)
        name = NAME.sub("", node.get("title") or hint) or "Answer"
        return create_model(name.replace("-", "_"), __config__=config, **fields)

    def _ref(self, ref: Any, depth: int) -> Any:
        if not isinstance(ref, str):
            raise InvalidRequest("schema", f"$ref must be a string, got {echo(ref)}")
        if ref in self.refs:
            return self.refs[ref] or Any  # None while it is being made: a recursive schema
        self.refs[ref] = None
        target = pointer(self.root, ref)
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


def _literal(values: list[Any]) -> Any:
    if not values or not all(v is None or isinstance(v, (str, int, float, bool)) for v in values):
        return Any
    return Literal.__getitem__(tuple(values))


def _union(types: list[Any]) -> Any:
    return types[0] if len(types) == 1 else Union.__getitem__(tuple(types))


def pointer(root: dict[str, Any], ref: str) -> Any:
    """The node a local ``$ref`` (``#/$defs/Name``) points at."""
    if not ref.startswith("#"):
        raise InvalidRequest("schema", f"only local $refs (#/...) are followed, got {echo(ref)}")
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise InvalidRequest("schema", f"$ref {echo(ref)} points at nothing")
    return node


def resolved(node: Any, root: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """`node` with its ``$ref`` followed, a lone ``allOf`` opened and a nullable ``anyOf``
    reduced to its other member (a frame's columns are nullable anyway)."""
    if not isinstance(node, dict) or depth > MAX_DEPTH:
        return {}
    if isinstance(node.get("$ref"), str):
        try:
            target = pointer(root, node["$ref"])
        except InvalidRequest:
            return {}
        extra = {k: v for k, v in node.items() if k != "$ref"}
        return resolved({**target, **extra} if isinstance(target, dict) else {}, root, depth + 1)
    if isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
        return resolved(node["allOf"][0], root, depth + 1)
    options = node.get("anyOf") or node.get("oneOf")
    if isinstance(options, list):
        real = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
        if len(real) == 1:
            return resolved(real[0], root, depth + 1)
    if isinstance(node.get("type"), list):
        real = [t for t in node["type"] if t != "null"]
        if len(real) == 1:
            return {**node, "type": real[0]}
    return node


def kind_of(node: dict[str, Any], root: dict[str, Any]) -> Kind:
    """What the root of a schema holds: an object, a list, or another value."""
    node = resolved(node, root)
    kind = node.get("type")
    if kind == "object" or (kind is None and "properties" in node):
        return "object"
    if kind == "array" or (kind is None and "items" in node):
        return "list"
    return "value"


# -- the forms sent to the APIs ---------------------------------------------------------


def wrapped(json_schema: dict[str, Any], key: str) -> dict[str, Any]:
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


def tightened(json_schema: dict[str, Any]) -> dict[str, Any]:
    """A copy in strict mode's form: objects closed where they did not say, every property
    required, defaults gone, a ``$ref`` with other keywords beside it inlined (strict mode
    takes a ``$ref`` alone: those are kept). More than `max_nodes` nodes is an
    `InvalidRequest` (module docstring)."""
    root = copy.deepcopy(json_schema)
    budget = _Budget()

    def walk(node: Any, depth: int) -> Any:
        if not isinstance(node, dict) or depth > MAX_DEPTH:
            return node
        budget.spend()
        if isinstance(node.get("$ref"), str) and len(node) > 1:
            try:
                target = pointer(root, node["$ref"])
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


def is_strict(wire: dict[str, Any]) -> bool:
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
    alternative, only the keywords and formats it takes, ``propertyOrdering`` kept. More
    than `max_nodes` nodes is an `InvalidRequest` (module docstring)."""
    budget = _Budget()

    def convert(node: Any, refs: tuple[str, ...]) -> dict[str, Any] | None:
        if not isinstance(node, dict) or len(refs) > MAX_DEPTH:
            return None
        budget.spend()
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in refs:
                return None
            try:
                target = pointer(json_schema, ref)
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
