"""Typed answers of the stand-ins: JSON that validates against the schema a request carries.

A request asks for a typed answer natively (chat ``response_format``, responses
``text.format``, generate-content ``generationConfig``, messages a forced tool: the readers
below) or in words: the instruction `gatecell.wire.typed.structured.instruction` writes, found
here by `structured.instructed`, so that client and gateway read one format. `answer` then
replies with a value built from the JSON Schema (or Gemini's OpenAPI subset of it) and
filled from the prompt the way a tutorial needs it to look: a sentiment from a small
lexicon, the numbers, names, dates, e-mail addresses and URLs it finds, a rating from the
words of a review, one list item per name (or sentence) found, booleans from the words of
the field's name, the label of an enum the text argues for (else the first).

It is a **stand-in, not a model**: it reads no meaning, and it does not run a request's
``pattern`` (a regular expression from the network is not run here), so a string with one
may not match it. It is deterministic: the same prompt and schema give the same bytes. Its
work is bounded like the chat stand-in's: patterns linear in the prompt, at most
`MAX_NODES` values and `chatbot.MAX_DEPTH` levels per answer (more is `Refused`, a 400).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gatecell.wire.transport.errors import InvalidRequest
from gatecell.wire.typed.structured import instructed
from gatecell.wire.typed.structured.json_schema import pointer

from . import Refused, chatbot
from .chatbot import Generated, Turn

__all__ = ["Wanted", "MAX_NODES", "by_chat", "by_responses", "by_generate", "forced_tool", "answer", "fill"]

MAX_NODES = 5000  # values in one answer
MAX_ITEMS = 20  # items of a list filled from the prompt
_SHALLOW = 4  # below this depth, recursive schemas stop: optional fields left out, lists minimal


@dataclass(frozen=True)
class Wanted:
    """What a request asks the answer to be: JSON valid for ``schema`` (None: any JSON
    object), or, with ``labels``, one of them as bare text."""

    schema: dict[str, Any] | None = None
    labels: tuple[str, ...] = ()


# -- what a request asks for -----------------------------------------------------------


def by_chat(data: dict[str, Any]) -> Wanted | None:
    """Chat completions ``response_format``."""
    return _format(data.get("response_format"), "response_format", nested=True)


def by_responses(data: dict[str, Any]) -> Wanted | None:
    """Responses ``text.format``."""
    text = data.get("text")
    return _format(text.get("format"), "text.format", nested=False) if isinstance(text, dict) else None


def _format(fmt: Any, where: str, *, nested: bool) -> Wanted | None:
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise Refused(f'{where} must be an object such as {{"type": "json_schema", ...}}')
    kind = fmt.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        return Wanted()
    if kind != "json_schema":
        raise Refused(f"{where}.type must be text, json_object or json_schema; got {kind!r:.60}")
    spec = fmt.get("json_schema") if nested else fmt
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        path = f"{where}.json_schema.schema" if nested else f"{where}.schema"
        raise Refused(f"{path} must be a JSON Schema object")
    return Wanted(schema)


def by_generate(data: dict[str, Any]) -> Wanted | None:
    """Generate-content ``generationConfig``: ``responseMimeType`` application/json with
    ``responseSchema`` (or ``responseJsonSchema``), or text/x.enum with an enum schema."""
    config = data.get("generationConfig") or data.get("generation_config")
    if not isinstance(config, dict):
        return None
    mime = config.get("responseMimeType") or config.get("response_mime_type")
    schema = next(
        (
            config[key]
            for key in ("responseJsonSchema", "responseSchema", "response_json_schema", "response_schema")
            if isinstance(config.get(key), dict)
        ),
        None,
    )
    if mime == "text/x.enum" and schema is not None and isinstance(schema.get("enum"), list):
        return Wanted(labels=tuple(str(v) for v in schema["enum"]))
    return Wanted(schema) if mime == "application/json" else None


def forced_tool(data: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """Messages: the tool ``tool_choice`` forces (by name, or ``any`` of one tool) and its
    input schema; None when no tool is forced."""
    tools, choice = data.get("tools"), data.get("tool_choice")
    if not isinstance(tools, list) or not isinstance(choice, dict):
        return None
    if choice.get("type") == "tool":
        name = choice.get("name")
    elif choice.get("type") == "any" and len(tools) == 1 and isinstance(tools[0], dict):
        name = tools[0].get("name")
    else:
        return None
    for tool in tools:
        if isinstance(tool, dict) and tool.get("name") == name:
            schema = tool.get("input_schema")
            if not isinstance(schema, dict):
                raise Refused(f"tool {name!r:.60}: input_schema must be a JSON Schema object")
            return str(name), schema
    raise Refused(f"tool_choice names the tool {name!r:.60}, which tools does not define")


# -- the answer ------------------------------------------------------------------------


def answer(
    turns: list[Turn],
    system: str | None = None,
    max_tokens: int | None = None,
    wanted: Wanted | None = None,
    attached: Sequence[Sequence[Any]] = (),
    name: str = "local-chat",
) -> Generated:
    """`chatbot.answer` (with the pictures and documents ``attached`` to the turns, by the
    model ``name``), unless the request (`wanted`) or its prompt (the instruction) asks for a
    typed answer: then that, as JSON text (or a bare label)."""
    system = chatbot.system_of(turns, system)
    question = next((text for role, text in reversed(turns) if role == "user"), "")
    found = instructed(question)
    prompt = found.prompt if found else question
    found = found or (instructed(system) if system else None)
    if wanted is None or (wanted.schema is None and not wanted.labels and found is not None):
        if found is None:
            return chatbot.answer(turns, system, max_tokens, attached, name)
        wanted = Wanted(found.json_schema, found.labels)
    if wanted.labels:
        text = chatbot.pick_label(list(wanted.labels), prompt) or wanted.labels[0]
    elif wanted.schema is None:  # JSON mode with no schema: the plain reply, as JSON
        text = json.dumps({"answer": chatbot.compose(turns, "", attached, name)}, ensure_ascii=False)
    else:
        text = json.dumps(fill(wanted.schema, prompt), ensure_ascii=False)
    return chatbot.cut(text, turns, system, max_tokens)


def fill(schema: dict[str, Any], prompt: str) -> Any:
    """A value valid for `schema`, filled from what `prompt` says."""
    return _Filler(schema).value(schema, _Text(prompt), "", 0)


# -- what a text says ------------------------------------------------------------------

_MONTHS = "january february march april may june july august september october november december".split()
_MONTH = "|".join(f"{m[:3]}(?:{m[3:]})?" for m in _MONTHS)
_DATE = re.compile(
    r"\b(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?"
    rf"|\b({_MONTH})\.?[ \t]+(\d{{1,2}})(?:st|nd|rd|th)?,?[ \t]+(\d{{4}})\b"
    rf"|\b(\d{{1,2}})(?:st|nd|rd|th)?[ \t]+({_MONTH})\.?,?[ \t]+(\d{{4}})\b",
    re.I,
)
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")
_WORD_NUMBERS = "zero one two three four five six seven eight nine ten".split()
_RATING = re.compile(
    rf"\b(\d+(?:\.\d+)?|{'|'.join(_WORD_NUMBERS)})[ \t]*(?:/[ \t]*(\d+)|out of[ \t]+(\d+)|stars?\b)", re.I
)
_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*(?:[ \t]+[A-Z][\w'’-]*)*")
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}")
_URL = re.compile(r"\bhttps?://[^\s<>\"']+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_FIELD_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
# Capitalised words that are not names: instructions' verbs, months and days.
_NOT_NAMES = chatbot.STOP_WORDS | frozenset(
    "read extract classify summarize summarise find list give pull score rate name return answer identify "
    "review text note dear hi hello thanks thank sincerely regards "
    "monday tuesday wednesday thursday friday saturday sunday".split()
    + _MONTHS
)


class _Text:
    """What the stand-in reads in a piece of text, found once; the cursors hand each name
    and number to one field only."""

    def __init__(self, text: str, name: str | None = None) -> None:
        self.text = text
        self.words = chatbot.words_of(text)
        self.mood = chatbot.sentiment(self.words)
        self.dates: list[datetime.datetime] = []
        for match in _DATE.finditer(text):
            found = _date(match.groups())
            if found is not None:
                self.dates.append(found)
        rest = _DATE.sub(" ", text)
        self.numbers = [float(n.replace(",", "")) for n in _NUMBER.findall(_URL.sub(" ", rest))]
        rating = _RATING.search(text)
        self.rating = _rating(rating.groups()) if rating else None
        self.emails = _EMAIL.findall(text)
        self.urls = [u.rstrip(".,;:!?)") for u in _URL.findall(text)]
        self.names = ([name] if name else []) + [n for n in _names(_URL.sub(" ", text)) if n != name]
        self.content = _content(text)
        self.sentences = [s.strip() for s in _SENTENCE.split(self.content) if s.strip()] or [
            self.content.strip() or "none"
        ]
        self._name_at = self._number_at = 0

    def next_name(self) -> str | None:
        if self._name_at < len(self.names):
            self._name_at += 1
            return self.names[self._name_at - 1]
        return None

    def next_number(self) -> float | None:
        if self._number_at < len(self.numbers):
            self._number_at += 1
            return self.numbers[self._number_at - 1]
        return None

    def around(self, name: str) -> _Text:
        """The sentence naming `name`, read on its own, `name` first among its names."""
        sentence = next((s for s in self.sentences if name in s), name)
        return _Text(sentence, name)


def _content(text: str) -> str:
    """`text` without a short lead-in ending in a colon ("Read this review: ..."), which is
    the prompt's instruction rather than what it is about."""
    head, colon, rest = text.partition(":")
    if colon and rest.strip() and "\n" not in head and len(head.split()) <= 8:
        return rest.strip()
    return text


def _date(groups: tuple[str | None, ...]) -> datetime.datetime | None:
    year, month, day, hour, minute, second = groups[:6]
    try:
        if year:
            return datetime.datetime(
                int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0), int(second or 0)
            )
        if groups[6]:
            return datetime.datetime(int(groups[8] or 0), _month(groups[6]), int(groups[7] or 0))
        return datetime.datetime(int(groups[11] or 0), _month(groups[10] or ""), int(groups[9] or 0))
    except ValueError:  # a day the calendar lacks
        return None


def _month(word: str) -> int:
    return next(i for i, m in enumerate(_MONTHS, 1) if m.startswith(word.lower()[:3]))


def _rating(groups: tuple[str | None, ...]) -> tuple[float, float | None]:
    """(the rating, the scale it is out of, when said)."""
    value, over, out_of = groups
    low = (value or "").lower()
    number = float(_WORD_NUMBERS.index(low)) if low in _WORD_NUMBERS else float(value or 0)
    scale = over or out_of
    return number, float(scale) if scale else None


def _opens_sentence(text: str, at: int) -> bool:
    """Whether `at` begins a sentence: the text before it, spaces aside, is empty or ends one.
    (Only the spaces just before are looked at, so that the walk over a text stays linear.)"""
    at -= 1
    while at >= 0 and text[at] in " \t":
        at -= 1
    return at < 0 or text[at] in ".!?:\n"


def _names(text: str) -> list[str]:
    """Runs of capitalised words, without the leading words that are not names (stop
    words, verbs of instructions, months and days); one word opening a sentence is not a
    name either (it is capitalised for the sentence)."""
    names: dict[str, None] = {}  # in order, each once
    for match in _CAPITALISED.finditer(text):
        words = match.group().split()
        first = 0
        while first < len(words) and words[first].lower().strip("'’") in _NOT_NAMES:
            first += 1
        opens = first == 0 and _opens_sentence(text, match.start())
        if first == len(words) or (opens and len(words) == 1):
            continue
        names[" ".join(words[first:]).rstrip("'’-")] = None
    return list(names)


# -- the value -------------------------------------------------------------------------

_NAME_LIKE = frozenset(
    "name names person people who author authors company companies organization organisation org brand "
    "product products city country place location customer vendor seller buyer sender recipient "
    "manufacturer maker speaker character employee owner artist".split()
)
_MOOD_LIKE = frozenset("sentiment sentiments tone mood polarity feeling attitude emotion".split())
_RATING_LIKE = frozenset("stars star rating ratings score grade".split())
_PROSE_LIKE = frozenset(
    "summary reason reasons reasoning explanation description comment comments justification why "
    "rationale text quote excerpt note notes answer evidence details".split()
)
_DATE_LIKE = frozenset("date when day deadline due birthday dob".split())
_GOOD = frozenset("positive recommend recommended recommends satisfied happy good liked like pleased".split())
_BAD = frozenset("negative complaint complaints angry unhappy bad refund problem issue".split())
_BOOL_FILLER = frozenset(
    "is has have was were are did does do should can contains mentions includes any".split()
)


def _field_words(field: str) -> set[str]:
    return {w.lower() for w in _FIELD_WORDS.findall(field)}


class _Filler:
    """Builds one value for a schema, counting what it makes (`MAX_NODES`)."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.nodes = 0

    def value(self, node: Any, text: _Text, field: str, depth: int, nullable: bool = False) -> Any:
        """A value for `node`; with `nullable`, None where the text has nothing to give."""
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise Refused(f"the schema asks for more than {MAX_NODES} values; local-chat makes at most that")
        if depth > chatbot.MAX_DEPTH:
            raise Refused(f"the schema nests more than {chatbot.MAX_DEPTH} levels deep")
        node = self._resolved(node, depth)
        if "const" in node:
            return node["const"]
        if isinstance(node.get("enum"), list) and node["enum"]:
            return self.choice(node["enum"], text)
        options = node.get("anyOf") or node.get("oneOf")
        if isinstance(options, list) and options:
            real = [o for o in options if not (isinstance(o, dict) and str(o.get("type")).lower() == "null")]
            if not real or (depth > _SHALLOW and len(real) < len(options)):
                return None
            return self.value(real[0], text, field, depth + 1, nullable or len(real) < len(options))
        kind = node.get("type")
        if isinstance(kind, list):
            real_kinds = [k for k in kind if str(k).lower() != "null"]
            if not real_kinds or (depth > _SHALLOW and len(real_kinds) < len(kind)):
                return None
            kind, nullable = real_kinds[0], nullable or len(real_kinds) < len(kind)
        if kind is None:
            kind = "object" if "properties" in node else "array" if "items" in node else "string"
        kind = str(kind).lower()
        if node.get("nullable") is True:
            if depth > _SHALLOW:
                return None
            nullable = True
        if kind == "object":
            return self.object(node, text, depth)
        if kind == "array":
            return self.array(node, text, field, depth)
        if kind in ("integer", "number"):
            return self.number(node, text, field, integer=kind == "integer", nullable=nullable)
        if kind == "boolean":
            return self.boolean(text, field)
        if kind == "null":
            return None
        return self.string(node, text, field, nullable=nullable)

    def _resolved(self, node: Any, depth: int) -> dict[str, Any]:
        for _ in range(chatbot.MAX_DEPTH):
            if not isinstance(node, dict):
                return {}
            ref = node.get("$ref")
            if isinstance(ref, str):
                node = {**_pointer(self.root, ref), **{k: v for k, v in node.items() if k != "$ref"}}
            elif isinstance(node.get("allOf"), list) and node["allOf"]:
                merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
                for part in node["allOf"]:
                    part = self._resolved(part, depth + 1)
                    properties = {**(part.get("properties") or {}), **(merged.get("properties") or {})}
                    merged = {**part, **merged, "properties": properties}
                node = merged
            else:
                return node
        raise Refused(f"the schema's $refs chain more than {chatbot.MAX_DEPTH} times")

    def object(self, node: dict[str, Any], text: _Text, depth: int) -> dict[str, Any]:
        properties = node.get("properties")
        if not isinstance(properties, dict):
            return {}
        required = node.get("required")
        required = set(required) if isinstance(required, list) else set(properties)
        return {
            key: self.value(sub, text, str(key), depth + 1)
            for key, sub in properties.items()
            if depth <= _SHALLOW or key in required
        }

    def array(self, node: dict[str, Any], text: _Text, field: str, depth: int) -> list[Any]:
        items = self._resolved(node.get("items") or {}, depth)
        low = _int(node.get("minItems"), 0)
        high = min(_int(node.get("maxItems"), MAX_ITEMS), MAX_ITEMS)
        if low > MAX_NODES:
            raise Refused(f"minItems {low} asks for more than {MAX_NODES} values")
        if depth > _SHALLOW:
            return [self.value(items, text, field, depth + 1) for _ in range(low)]
        kind = str(items.get("type") or ("object" if "properties" in items else "")).lower()
        words = _field_words(field)
        parts: list[Any]
        if kind == "object":
            keys = {w for key in (items.get("properties") or {}) for w in _field_words(str(key))}
            names = text.names if keys & _NAME_LIKE else []
            count = max(high, low)
            contexts = [text.around(n) for n in names[:count]] or [_Text(s) for s in text.sentences[:count]]
            parts = [self.value(items, c, field, depth + 1) for c in contexts]
        elif kind == "string" and "enum" not in items and "format" not in items:
            parts = list(text.names) if words & _NAME_LIKE else chatbot.keywords(text.content, 5)
        elif kind in ("integer", "number"):
            parts = [int(round(n)) if kind == "integer" else n for n in text.numbers]
        else:
            parts = [self.value(items, text, field, depth + 1)]
        parts = (parts or [self.value(items, text, field, depth + 1)])[:high]
        while parts and len(parts) < low:
            parts.append(parts[-1])
        return parts

    def choice(self, values: list[Any], text: _Text) -> Any:
        labels = [v for v in values if isinstance(v, str)]
        return (chatbot.pick_label(labels, text.text) if labels else None) or values[0]

    def number(
        self, node: dict[str, Any], text: _Text, field: str, *, integer: bool, nullable: bool
    ) -> float | int | None:
        low = _number(node.get("minimum"), node.get("exclusiveMinimum"), 1)
        high = _number(node.get("maximum"), node.get("exclusiveMaximum"), -1)
        words = _field_words(field)
        found: float | None
        if words & _RATING_LIKE:
            scale_low = low if low is not None else 1.0
            said = text.rating[1] if text.rating else None
            scale_high = high if high is not None else said or 5.0
            if text.rating is not None:
                found = text.rating[0]
            else:
                found = (
                    scale_high
                    if text.mood > 0
                    else scale_low
                    if text.mood < 0
                    else (scale_low + scale_high) / 2
                )
        else:
            found = text.next_number()
            if found is None and nullable:
                return None
        value = found if found is not None else (low if low is not None else 0.0)
        value = min(max(value, low if low is not None else value), high if high is not None else value)
        step = node.get("multipleOf")
        if isinstance(step, (int, float)) and not isinstance(step, bool) and step > 0:
            value = round(value / step) * step
        return int(round(value)) if integer else value

    def boolean(self, text: _Text, field: str) -> bool:
        words = _field_words(field) - _BOOL_FILLER
        if words & _GOOD:
            return text.mood > 0
        if words & _BAD:
            return text.mood < 0 or bool(words & set(text.words))
        return any(w in text.words or f"{w}s" in text.words for w in words if len(w) > 2)

    def string(self, node: dict[str, Any], text: _Text, field: str, *, nullable: bool) -> str | None:
        words = _field_words(field)
        fmt = node.get("format")
        found: str | None
        if fmt in ("date-time", "date", "time") or (fmt is None and words & _DATE_LIKE):
            if not text.dates and nullable:
                return None
            when = text.dates[0] if text.dates else datetime.datetime(2026, 1, 1)
            shown = {"date-time": when.isoformat(), "time": when.time().isoformat()}
            value = shown.get(str(fmt), when.date().isoformat())
        elif fmt == "email" or "email" in words:
            found = text.emails[0] if text.emails else None
            if found is None and nullable:
                return None
            value = found or "someone@example.com"
        elif fmt in ("uri", "url", "iri") or words & {"url", "uri", "link", "website"}:
            found = text.urls[0] if text.urls else None
            if found is None and nullable:
                return None
            value = found or "https://example.com/"
        elif fmt == "uuid":
            value = str(uuid.UUID(bytes=hashlib.sha256(text.text.encode()).digest()[:16], version=4))
        elif fmt in _FIXED_FORMATS:
            value = _FIXED_FORMATS[fmt]
        elif words & _MOOD_LIKE:
            value = "positive" if text.mood > 0 else "negative" if text.mood < 0 else "neutral"
        elif words & _NAME_LIKE:
            found = text.next_name()
            if found is None and nullable:
                return None
            value = found or next(iter(chatbot.keywords(text.content, 1)), "unknown")
        elif words & _PROSE_LIKE or not words:
            value = text.sentences[0][:200]
        else:
            value = " ".join(chatbot.keywords(text.content, 3)) or text.sentences[0][:80]
        low, high = _int(node.get("minLength"), 0), node.get("maxLength")
        if isinstance(high, int) and not isinstance(high, bool) and high >= 0:
            value = value[:high]
        if len(value) < low:
            value = (value or "x").ljust(low, ".")
        return value


_FIXED_FORMATS = {
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "hostname": "example.com",
    "duration": "PT0S",
}


def _pointer(root: dict[str, Any], ref: str) -> dict[str, Any]:
    """The schema a ``$ref`` points at (the client's reading of it), or `Refused`."""
    try:
        node = pointer(root, ref)
    except InvalidRequest as exc:
        raise Refused(exc.message) from None
    if not isinstance(node, dict):
        raise Refused(f"$ref {ref!r:.80} points at nothing in the schema")
    return node


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def _number(inclusive: Any, exclusive: Any, side: int) -> float | None:
    """A bound (`side` 1 for a minimum, -1 for a maximum); an exclusive one moved inside by 1."""
    for bound, shift in ((inclusive, 0), (exclusive, side)):
        if isinstance(bound, (int, float)) and not isinstance(bound, bool):
            return float(bound) + shift
    return None
