"""Tools for the offline stand-ins, deterministically: which tools a request offers, whether
the prompt calls for them, with which arguments, and the sentence that answers their results.

A request offering tools (each API's shape: WIRE-NOTES "Tools") is answered with calls when
the last user turn names tools (a name, or a name with spaces for underscores): those are
called; else every tool it fits (each required parameter can be filled from the prompt).
Arguments come from the prompt: a parameter named like an id takes the ids it finds
(``A-1027``), other strings quoted text or a capitalised word, numbers the numbers; a tool
with one required string parameter and several values found gets one call per value (the
prompt asked for several). When the last turn carries tool results, the answer is a
sentence quoting them. ``tool_choice`` "none" (NONE) turns all this off.

Like the chat stand-in it reads no meaning and runs nothing; its patterns are linear.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from . import chatbot

__all__ = ["Offered", "Plan", "plan"]

_ID = re.compile(r"\b[A-Za-z]{1,6}-?\d[\w-]{0,30}")
_QUOTED = re.compile(r"[\"'“‘]([^\"'”’\n]{1,200})[\"'”’]")
_CAPITAL = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,30}\b")
_NUMBER = re.compile(r"(?<![\w.-])-?\d+(?:\.\d+)?(?![\w-])")
_MAX_CALLS = 8


@dataclass(frozen=True)
class Offered:
    name: str
    schema: dict[str, Any]


@dataclass
class Plan:
    """The calls to answer with (name, arguments), or the sentence quoting the results."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    said: str | None = None


def plan(api: str, data: dict[str, Any]) -> Plan | None:
    """What the stand-in does with the tools ``data`` offers; None when it offers none (or
    ``tool_choice`` says none) and the usual answer stands."""
    tools = _offered(api, data)
    if not tools or _choice_none(data):
        return None
    results = _results(api, data)
    if results:
        quoted = "; ".join(f"{name + ': ' if name else ''}{_short(text)}" for name, text in results)
        return Plan(said=f"Here is what the tools told me: {quoted}.")
    prompt = _last_user(api, data)
    chosen = [t for t in tools if _names(t.name, prompt)] or [t for t in tools if _fits(t, prompt)]
    if not chosen:
        return None
    calls: list[tuple[str, dict[str, Any]]] = []
    for tool in chosen:
        calls += [(tool.name, arguments) for arguments in _arguments(tool.schema, prompt)]
    return Plan(calls=calls[:_MAX_CALLS])


# -- what the request holds ------------------------------------------------------------------


def _offered(api: str, data: dict[str, Any]) -> list[Offered]:
    tools = data.get("tools")
    if not isinstance(tools, list):
        return []
    found = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if api == "generate-content":
            for declaration in tool.get("functionDeclarations") or tool.get("function_declarations") or ():
                if isinstance(declaration, dict) and isinstance(declaration.get("name"), str):
                    found.append(Offered(declaration["name"], declaration.get("parameters") or {}))
            continue
        spec = tool.get("function") if api == "chat" else tool
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            continue
        schema = spec.get("input_schema") if api == "messages" else spec.get("parameters")
        found.append(Offered(spec["name"], schema if isinstance(schema, dict) else {}))
    return found


def _choice_none(data: dict[str, Any]) -> bool:
    choice = data.get("tool_choice")
    if choice == "none" or (isinstance(choice, dict) and choice.get("type") == "none"):
        return True
    config = data.get("toolConfig") or {}
    mode = (config.get("functionCallingConfig") or {}).get("mode") if isinstance(config, dict) else None
    return mode == "NONE"


def _results(api: str, data: dict[str, Any]) -> list[tuple[str | None, str]]:
    """The tool results of the last turns (after the model's last calls), in order."""
    turns = data.get({"generate-content": "contents", "responses": "input"}.get(api, "messages"))
    if not isinstance(turns, list):
        return []
    found: list[tuple[str | None, str]] = []
    for turn in reversed(turns):
        if not isinstance(turn, dict):
            break
        if api == "chat" and turn.get("role") == "tool":
            found.append((None, chatbot.text_of(turn.get("content"))))
        elif api == "responses" and turn.get("type") == "function_call_output":
            found.append((None, chatbot.text_of(turn.get("output"))))
        elif api == "messages" and isinstance(turn.get("content"), list):
            blocks = [b for b in turn["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
            found += [(None, chatbot.text_of(b.get("content"))) for b in reversed(blocks)]
            break
        elif api == "generate-content":
            parts = [p.get("functionResponse") for p in turn.get("parts") or () if isinstance(p, dict)]
            responses = [r for r in parts if isinstance(r, dict)]
            found += [(r.get("name"), _response_text(r.get("response"))) for r in reversed(responses)]
            break
        else:
            break
    return found[::-1]


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " …"


def _response_text(response: Any) -> str:
    if isinstance(response, dict) and len(response) == 1:
        (value,) = response.values()
        return value if isinstance(value, str) else str(value)
    return str(response)


def _last_user(api: str, data: dict[str, Any]) -> str:
    turns = data.get({"generate-content": "contents", "responses": "input"}.get(api, "messages"))
    if isinstance(turns, str):
        return turns
    for turn in reversed(turns if isinstance(turns, list) else []):
        if isinstance(turn, dict) and turn.get("role", "user") == "user":
            return chatbot.text_of(turn.get("parts") if api == "generate-content" else turn.get("content"))
    return ""


# -- the arguments -----------------------------------------------------------------------------


def _names(name: str, prompt: str) -> bool:
    lower = prompt.lower()
    return name.lower() in lower or name.replace("_", " ").lower() in lower


def _properties(schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = [r for r in schema.get("required") or () if r in properties]
    return properties, required


def _kind(node: Any) -> str:
    if not isinstance(node, dict):
        return "string"
    kind = node.get("type")
    if kind is None:
        options = [o for o in node.get("anyOf") or () if isinstance(o, dict) and o.get("type") != "null"]
        kind = options[0].get("type") if options else "string"
    return str(kind).lower()


def _values(name: str, node: Any, prompt: str) -> list[Any]:
    """What the prompt offers for the parameter ``name``, in order of appearance."""
    if isinstance(node, dict) and isinstance(node.get("enum"), list) and node["enum"]:
        return [v for v in node["enum"] if isinstance(v, str) and v.lower() in prompt.lower()][:1]
    kind = _kind(node)
    if kind in ("integer", "number"):
        numbers = [float(m) for m in _NUMBER.findall(prompt)]
        return [int(n) if kind == "integer" or n.is_integer() else n for n in numbers]
    if kind == "boolean":
        return []
    if kind != "string":
        return []
    quoted = _QUOTED.findall(prompt)
    if re.search(r"(?:^|_)id$|Id$|ID$", name):  # an id: the ids in the prompt, else quoted text
        return _unique(_ID.findall(prompt) or quoted)
    return _unique(quoted or _CAPITAL.findall(prompt))


def _unique(values: list[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def _fits(tool: Offered, prompt: str) -> bool:
    properties, required = _properties(tool.schema)
    return bool(required) and all(_values(r, properties[r], prompt) for r in required)


def _arguments(schema: dict[str, Any], prompt: str) -> list[dict[str, Any]]:
    """One set of arguments, or one per value found when the tool has one required string
    parameter and the prompt gives several."""
    properties, required = _properties(schema)
    found = {name: _values(name, node, prompt) for name, node in properties.items()}
    base = {name: values[0] for name, values in found.items() if values}
    for name in required:
        if name not in base:
            base[name] = "" if _kind(properties[name]) == "string" else 0
    strings = [r for r in required if _kind(properties[r]) == "string"]
    if len(required) == 1 and strings and len(found[strings[0]]) > 1:
        return [{**base, strings[0]: value} for value in found[strings[0]][:_MAX_CALLS]]
    return [base]
