"""What a caller hands to the store, and the rows the writer thread makes of it.

The caller's side (`ExchangeEntry`, `JobEntry`) only keeps references: building one costs a
few microseconds. Everything that costs more (JSON, redaction, hashing, reading usage in its
several shapes) happens here, in the writer thread.

Every text column goes through `gatecell.wire.util.secret.redact` (the entry's secrets, the
process's keys, key shapes, credentials), the JSON ones after decoding (`redact_json`): a key
a gateway sent as ``\\u`` escapes is masked too, and the cache, which replays what is stored,
replays it masked. Only the columns gatecell computes itself (time, cache key, sizes,
digests) are left as they are.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pydantic_core import to_json

from gatecell.wire.apis.conversation import content_summary  # here, not in the writer thread (see to_json)
from gatecell.wire.apis.names import api_of
from gatecell.wire.typed.structured import instruction
from gatecell.wire.util.secret import Secret, redact, redact_json, suspect

from .keys import cache_key, gateway_address

_MAPPING = (dict, Mapping)  # dict first: what JSON gives, and an instant check

__all__ = [
    "ExchangeEntry",
    "JobEntry",
    "PricesEntry",
    "EXCHANGE_COLUMNS",
    "JOB_COLUMNS",
    "VectorsEntry",
    "exchange_row",
    "job_row",
    "ToolCallEntry",
    "TOOL_CALL_COLUMNS",
    "tool_call_row",
    "iso",
    "usage_counts",
    "text_of",
]

Secrets = Sequence[Secret | str | None]


@dataclass(slots=True)
class ExchangeEntry:
    at: float
    endpoint: str
    model: str | None
    request: Any
    response: Any
    text: str | None
    reasoning: str | None
    usage: Any
    latency: float | None
    status: int | None
    error: str | None
    request_id: str | None
    api: str | None
    prompt: str | None
    conversation: str | None
    notebook: str | None
    gateway: str | None
    cached: bool
    partial: bool
    cache_key: str | None
    media: bytes | None
    media_type: str | None
    log_media: bool
    secrets: Secrets
    schema: Any = None  # a typed answer's `gatecell.wire.typed.structured.Schema`
    parsed_json: str | None = None  # and the value read from it, as JSON
    cost: float | None = None
    cost_source: str | None = None


@dataclass(slots=True)
class JobEntry:
    at: float
    gateway: str | None
    kind: str
    job_id: str
    model: str | None
    prompt: str | None
    state: str | None
    progress: float | None
    error: str | None
    notebook: str | None
    body: Any
    secrets: Secrets


@dataclass(slots=True)
class ToolCallEntry:
    """One call of a tool chain (`gatecell.tools.ToolCall`), and the exchange that asked for
    it: found by its time and gateway when the row is written (the exchange's row comes first)."""

    at: float
    exchange_at: float | None
    gateway: str | None
    chain: str
    round: int
    call_id: str
    name: str
    arguments: Any
    result: str | None
    error: str | None
    approved: bool | None
    seconds: float
    conversation: str | None
    notebook: str | None
    secrets: Secrets


@dataclass(slots=True)
class PricesEntry:
    """What a gateway's model info said its models cost (dollars per million tokens)."""

    at: float
    gateway: str
    prices: dict[str, Any]  # model -> `prices.Price`

    def rows(self) -> list[tuple[Any, ...]]:
        """The ``model_prices`` rows: one per model, and one of model ``''`` saying when the
        gateway was asked (so it is not asked again, even if it gave none)."""
        gateway, at = gateway_address(self.gateway), iso(self.at)
        rows: list[tuple[Any, ...]] = [(gateway, "", None, None, at)]
        rows += [(gateway, m, p.input / 1e6, p.output / 1e6, at) for m, p in self.prices.items()]
        return rows


@dataclass(slots=True)
class VectorsEntry:
    """Vectors to keep: one answer's, ``vectors`` (little-endian float32, ``width`` numbers
    each, one after the other) for the texts of ``hashes`` (sha256), from one gateway, model
    and dimensions (0: the model's own)."""

    at: float
    gateway: str
    model: str
    dimensions: int
    hashes: list[bytes]
    vectors: bytes
    width: int


_SECOND: tuple[int, str] = (0, "1970-01-01T00:00:00")  # the last second formatted: rows come in runs


def iso(at: float) -> str:
    """Unix seconds → ``2026-01-02T03:04:05.123456Z`` (UTC; sorts as text)."""
    global _SECOND
    whole = math.floor(at)
    second, text = _SECOND
    if whole != second:
        text = datetime.fromtimestamp(whole, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        _SECOND = (whole, text)
    return f"{text}.{min(round((at - whole) * 1e6), 999_999):06d}Z"


def _plain(value: Any) -> Any:
    """Pydantic models and dataclass-like results as plain JSON data."""
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value  # python mode: faster; the encoder takes the rest


_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode  # made once


to_json(None)  # its first call imports modules (uuid, pathlib): here, with gatecell's imports, not
# later in the writer thread of a process that may no longer read them (it dropped privileges)


def _json(value: Any) -> str | None:
    """Compact JSON text. pydantic-core's encoder takes models as they are and is several
    times faster than `json`; what it refuses (bytes that are not UTF-8, lone surrogates)
    goes through the standard encoder, as before."""
    if value is None:
        return None
    try:
        return to_json(value, fallback=str).decode()
    except ValueError:
        return _ENCODE(_plain(value))


def _parsed(request: Any) -> Any:
    """A request body given as JSON bytes or text, parsed; a mapping as it is."""
    if isinstance(request, (bytes, bytearray, memoryview)):
        request = bytes(request).decode(errors="replace")
    if isinstance(request, str):
        try:
            return json.loads(request)
        except ValueError:
            return None
    return request


def text_of(content: Any) -> str | None:
    """Text of a message's content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p["text"] for p in content if isinstance(p, _MAPPING) and isinstance(p.get("text"), str)]
        return "\n".join(texts) if texts else None
    return None


_CONTENT_KEYS = ("messages", "contents", "input", "prompt")


def _prompt_of(body: Any) -> str | None:
    """The last user turn of messages / contents / input, or the ``prompt`` or ``input`` text."""
    if not isinstance(body, _MAPPING):
        return None
    for key in _CONTENT_KEYS:
        items = body.get(key)
        if isinstance(items, str):
            return items
        if isinstance(items, list):
            for item in reversed(items):
                if isinstance(item, _MAPPING) and item.get("role", "user") == "user":
                    text = text_of(item.get("content", item.get("parts")))
                    if text is not None:
                        return text
    return None


def _without_bytes(messages: list[Any]) -> list[Any]:
    """The turns with every picture or file they carry as its type, size and sha256
    (`content_summary`): the log keeps the bytes only with ``log_media``."""
    out = []
    for item in messages:
        if isinstance(item, _MAPPING):
            for key in ("content", "parts"):
                value = item.get(key)
                if isinstance(value, list):
                    summary = content_summary(value)
                    if summary is not value:
                        item = {**item, key: summary}
        out.append(item)
    return out


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _first(usage: Mapping[str, Any], *names: str) -> int | None:
    for name in names:
        value = _int(usage.get(name))
        if value is not None:
            return value
    return None


def _detail(usage: Mapping[str, Any], outer: str, inner: str) -> int | None:
    details = usage.get(outer)
    return _int(details.get(inner)) if isinstance(details, _MAPPING) else None


def usage_counts(usage: Any) -> tuple[int | None, int | None, int | None, int | None]:
    """(prompt, completion, reasoning, total) tokens from the usage shapes of WIRE-NOTES:
    chat, messages, responses and generate-content. Completion tokens include the reasoning
    tokens, as chat and responses count them (Gemini's ``thoughtsTokenCount`` is added)."""
    usage = _plain(usage)
    if not isinstance(usage, _MAPPING):
        return None, None, None, None
    prompt = _first(usage, "prompt_tokens", "input_tokens", "promptTokenCount")
    completion = _first(usage, "completion_tokens", "output_tokens", "candidatesTokenCount")
    thoughts = _int(usage.get("thoughtsTokenCount"))
    if thoughts is not None:
        completion = (completion or 0) + thoughts
    reasoning = (
        _detail(usage, "completion_tokens_details", "reasoning_tokens")
        or _detail(usage, "output_tokens_details", "reasoning_tokens")
        or thoughts
        or _int(usage.get("reasoning_tokens"))
    )
    total = _first(usage, "total_tokens", "totalTokenCount")
    if total is None and prompt is not None and completion is not None:
        total = prompt + completion
    return prompt, completion, reasoning, total


EXCHANGE_COLUMNS = tuple(
    "time endpoint model api gateway params_json prompt messages_json response reasoning prompt_tokens "
    "completion_tokens reasoning_tokens total_tokens usage_json latency status error request_id conversation "
    "notebook cached partial cache_key media_type media_size media_sha256 media response_json "
    "schema_name schema_json parsed_json cost cost_source".split()
)
JOB_COLUMNS = tuple(
    "gateway kind job_id model prompt state progress error notebook created updated body_json".split()
)


TOOL_CALL_COLUMNS = tuple(
    "time exchange_time gateway chain round call_id name arguments_json result error approved seconds "
    "conversation notebook".split()
)


def _columns(columns: tuple[str, ...], names: str) -> tuple[int, ...]:
    return tuple(columns.index(name) for name in names.split())


_EXCHANGE_TEXTS = _columns(
    EXCHANGE_COLUMNS,
    "endpoint model api gateway prompt response reasoning error request_id conversation notebook media_type "
    "schema_name",
)
_EXCHANGE_JSON = _columns(
    EXCHANGE_COLUMNS, "params_json messages_json usage_json response_json schema_json parsed_json"
)
_JOB_TEXTS = _columns(JOB_COLUMNS, "gateway kind job_id model prompt state error notebook")
_JOB_JSON = _columns(JOB_COLUMNS, "body_json")
_TOOL_TEXTS = _columns(TOOL_CALL_COLUMNS, "name result error conversation notebook")
_TOOL_JSON = _columns(TOOL_CALL_COLUMNS, "arguments_json")


def _redacted(
    row: list[Any], texts: tuple[int, ...], jsons: tuple[int, ...], secrets: Secrets
) -> tuple[Any, ...]:
    """``row`` with every text (the columns ``texts``, and the JSON ones ``jsons`` decoded)
    redacted. One test of all of them joined comes first: a row with nothing to mask, as
    almost every row is, is kept as it is."""
    joined = "\0".join(v for i in (*texts, *jsons) if isinstance(v := row[i], str))
    if "\\u" not in joined and "\\/" not in joined and not suspect(joined, *secrets):
        return tuple(row)
    for i in texts:
        if isinstance(row[i], str):
            row[i] = redact(row[i], *secrets)
    for i in jsons:
        if isinstance(row[i], str):
            row[i] = redact_json(row[i], *secrets)
    return tuple(row)


def exchange_row(e: ExchangeEntry) -> tuple[Any, ...]:
    """The ``exchanges`` row of an entry, every text redacted."""
    body = _parsed(e.request)
    key = e.cache_key
    if key is None and body is not None:
        key = cache_key(e.endpoint, e.model, body, e.gateway)
    messages = params = None
    if isinstance(body, _MAPPING):
        messages = next((body[k] for k in _CONTENT_KEYS[:3] if isinstance(body.get(k), list)), None)
        params = {k: v for k, v in body.items() if k != "model" and k not in _CONTENT_KEYS}
        if messages is not None and not e.log_media:
            messages = _without_bytes(messages)
    prompt = e.prompt if e.prompt is not None else _prompt_of(body)
    if e.schema is not None and prompt:  # the user's prompt; the instruction is in messages_json
        prompt = prompt.removesuffix("\n\n" + instruction(e.schema))
    error = e.error
    if error is None and e.status is not None and e.status >= 400:
        error = f"HTTP {e.status}"
    media_size = media_sha = media = None
    if e.media is not None:
        media_size, media_sha = len(e.media), hashlib.sha256(e.media).hexdigest()
        media = e.media if e.log_media else None
    keep_body = e.media is None or e.log_media  # a media reply's body may hold the bytes
    response = e.response if keep_body else None
    if isinstance(response, (bytes, bytearray)):  # JSON as received: decoded here, off the caller's path
        response = bytes(response).decode(errors="replace")
    row = [
        iso(e.at),
        e.endpoint,
        e.model,
        e.api or api_of(e.endpoint),
        gateway_address(e.gateway) or None,
        _json(params),
        prompt,
        _json(messages),
        e.text,
        e.reasoning,
        *usage_counts(e.usage),
        _json(e.usage),
        e.latency,
        e.status,
        error,
        e.request_id,
        e.conversation,
        e.notebook,
        int(e.cached),
        int(e.partial),
        key,
        e.media_type,
        media_size,
        media_sha,
        media,
        response if isinstance(response, str) else _json(response),
        *((None, None, None) if e.schema is None else (e.schema.name, e.schema.json_text, e.parsed_json)),
        e.cost,
        e.cost_source if e.cost is not None else None,
    ]
    return _redacted(row, _EXCHANGE_TEXTS, _EXCHANGE_JSON, e.secrets)


def job_row(j: JobEntry) -> tuple[Any, ...]:
    """The ``jobs`` row of an entry, every text redacted."""
    at = iso(j.at)
    body = j.body if isinstance(j.body, str) else _json(j.body)
    row = [
        gateway_address(j.gateway),
        j.kind,
        j.job_id,
        j.model,
        j.prompt,
        j.state,
        j.progress,
        j.error,
        j.notebook,
        at,
        at,
        body,
    ]
    return _redacted(row, _JOB_TEXTS, _JOB_JSON, j.secrets)


def tool_call_row(t: ToolCallEntry) -> tuple[Any, ...]:
    """The ``tool_calls`` row of an entry (less its exchange id, which the insert finds),
    every text redacted."""
    row = [
        iso(t.at),
        iso(t.exchange_at) if t.exchange_at is not None else None,
        gateway_address(t.gateway),
        t.chain,
        t.round,
        t.call_id,
        t.name,
        _json(t.arguments),
        t.result,
        t.error,
        None if t.approved is None else int(t.approved),
        t.seconds,
        t.conversation,
        t.notebook,
    ]
    return _redacted(row, _TOOL_TEXTS, _TOOL_JSON, t.secrets)
