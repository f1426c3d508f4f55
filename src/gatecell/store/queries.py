"""The reading side: SQL over one connection, plain results.

Kept apart from `Store` (threads, faults) so each query is a function of a connection and
its arguments. Exchanges come back as dicts with the keys of ``gatecell logs --json``;
cache answers, jobs and usage as small dataclasses.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from gatecell.wire.transport.results import MAX_COST
from gatecell.wire.util.secret import redact, redact_json

from .keys import gateway_address
from .prices import SOURCES, Price, per_token
from .records import iso, text_of
from .tables import index_new

__all__ = [
    "CachedReply",
    "StoredJob",
    "UsageRow",
    "answer",
    "exchanges",
    "conversation",
    "usage",
    "jobs",
    "job",
    "search_terms",
    "chat_messages",
    "model_prices",
]


def _loads(text: str | None) -> Any:
    return json.loads(text) if text else None


# -- the cache ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CachedReply:
    """What a logged exchange holds to answer the same request again."""

    text: str | None
    reasoning: str | None
    usage: Any  # the usage object as the gateway sent it
    response: Any  # the raw reply body (None for a reply that was streamed)
    request_id: str | None  # of the original exchange
    time: str  # of the original exchange (UTC ISO 8601)
    endpoint: str
    model: str | None
    latency: float | None


def _now() -> str:
    """Now, as the log writes times: a row dated later is no answer (it would win every lookup)."""
    return iso(time.time())


def answer(conn: sqlite3.Connection, key: str) -> CachedReply | None:
    """The newest complete, error-free, not partial, not itself cached exchange with ``key``,
    dated no later than now, redacted as it is now; None when that one's reply was empty (no
    text, no tool call): an empty reply answers nothing, and the request goes again."""
    row = conn.execute(
        "SELECT response, reasoning, usage_json, response_json, request_id, time, endpoint, model, latency "
        "FROM exchanges "
        "WHERE cache_key = ? AND cache_key IS NOT NULL AND error IS NULL AND partial = 0 AND cached = 0 "
        "AND time <= ? ORDER BY time DESC, id DESC LIMIT 1",
        (key, _now()),
    ).fetchone()
    if row is None:
        return None
    text, reasoning, usage, response, request_id, at, endpoint, model, latency = row
    # Redacted again as it is replayed: a row written before a rule existed holds what the
    # rule masks now (each step first asks whether the text can hold anything to mask).
    text, reasoning = (redact(v) if v else v for v in (text, reasoning))
    response = redact_json(response) if response else response
    try:
        body = _loads(response)
    except ValueError:  # a body that was not JSON (another tool's row): rebuilt from the text
        body = None
    if not text and not _calls_tools(body):
        return None
    return CachedReply(text, reasoning, _loads(usage), body, request_id, at, endpoint, model, latency)


_TOOL_CALLS = frozenset(("tool_calls", "function_call", "functionCall"))  # chat, generate-content
_TOOL_BLOCKS = frozenset(("tool_use", "function_call"))  # messages' and responses' items


def _calls_tools(body: Any) -> bool:
    """Whether a reply body holds a tool call, in any of the shapes of WIRE-NOTES."""
    if isinstance(body, dict):
        if body.get("type") in _TOOL_BLOCKS:
            return True
        return any((k in _TOOL_CALLS and bool(v)) or _calls_tools(v) for k, v in body.items())
    if isinstance(body, list):
        return any(_calls_tools(v) for v in body)
    return False


def answer_keys(conn: sqlite3.Connection, limit: int) -> set[str] | None:
    """The keys of every exchange that may answer (as `answer` picks them, but for the reply
    being empty: `answer` tells), read from the index alone; None when there are more than
    ``limit``."""
    keys = {
        key
        for (key,) in conn.execute(
            "SELECT DISTINCT cache_key FROM exchanges INDEXED BY exchanges_answers "
            "WHERE cache_key IS NOT NULL AND error IS NULL AND partial = 0 AND cached = 0 AND time <= ? "
            "LIMIT ?",
            (_now(), limit + 1),
        )
    }
    return keys if len(keys) <= limit else None


# -- the log ------------------------------------------------------------------------------

_EXCHANGE_FIELDS = ", ".join(
    f"e.{name}"
    for name in (
        "id time endpoint model api gateway params_json prompt messages_json response reasoning "
        "prompt_tokens completion_tokens reasoning_tokens total_tokens latency status error request_id "
        "conversation notebook cached partial media_type media_size media_sha256 schema_name parsed_json "
        "cost cost_source"
    ).split()
)
_TOKENS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "total_tokens")


def _exchange(row: sqlite3.Row) -> dict[str, Any]:
    usage = {name: row[name] for name in _TOKENS}
    return {
        "id": row["id"],
        "time": row["time"],
        "endpoint": row["endpoint"],
        "model": row["model"],
        "api": row["api"],
        "gateway": row["gateway"],
        "params": _loads(row["params_json"]),
        "prompt": row["prompt"],
        "messages": _loads(row["messages_json"]),
        "response": row["response"],
        "reasoning": row["reasoning"],
        "usage": usage if any(v is not None for v in usage.values()) else None,
        "latency": row["latency"],
        "status": row["status"],
        "error": row["error"],
        "request_id": row["request_id"],
        "conversation": row["conversation"],
        "notebook": row["notebook"],
        "cached": bool(row["cached"]),
        "partial": bool(row["partial"]),
        "media": (
            {"type": row["media_type"], "size": row["media_size"], "sha256": row["media_sha256"]}
            if row["media_sha256"]
            else None
        ),
        "schema": row["schema_name"],
        "parsed": _loads(row["parsed_json"]),
        "cost": row["cost"],
        "cost_source": row["cost_source"],
    }


_WORD = re.compile(r"\w")


def search_terms(text: str) -> list[str]:
    """The words of ``-q TEXT``: every one must appear (as a word prefix with FTS5, as a
    substring without)."""
    return [term for term in text.split() if _WORD.search(term)]


def _like(term: str) -> str:
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def exchanges(
    conn: sqlite3.Connection,
    n: int | None = 20,
    q: str | None = None,
    model: str | None = None,
    conversation: str | None = None,
) -> list[dict[str, Any]]:
    """The last ``n`` exchanges logged (all with ``n`` None or 0), newest first, filtered.

    ``q``: with FTS5, every word as a word prefix, walking the index newest first so that a
    common word stops after ``n`` matches; without it (or for punctuation alone), every word
    as a substring of the prompt or reply, by LIKE.
    """
    source, order = "exchanges AS e", "e.id"
    where: list[str] = []
    args: list[Any] = []
    terms = search_terms(q or "")
    if terms and index_new(conn):
        # The index first (CROSS JOIN keeps it outside), in rowid order: no sort, early stop.
        source, order = "exchanges_fts AS f CROSS JOIN exchanges AS e ON e.id = f.rowid", "f.rowid"
        where.append("exchanges_fts MATCH ?")
        args.append(" ".join('"' + term.replace('"', '""') + '"*' for term in terms))
    elif q and q.strip():
        for term in terms or [q.strip()]:
            where.append("(e.prompt LIKE ? ESCAPE '\\' OR e.response LIKE ? ESCAPE '\\')")
            args += [_like(term)] * 2
    if model:
        where.append("e.model = ?")
        args.append(model)
    if conversation:
        where.append("e.conversation = ?")
        args.append(conversation)
    sql = f"SELECT {_EXCHANGE_FIELDS} FROM {source}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY {order} DESC"
    if n:
        sql += " LIMIT ?"
        args.append(n)
    return _with_tool_calls(conn, [_exchange(row) for row in conn.execute(sql, args)])


def _with_tool_calls(conn: sqlite3.Connection, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with ``tool_calls``: the calls each exchange's answer asked for, in order."""
    calls: dict[int, list[dict[str, Any]]] = {row["id"]: [] for row in rows}
    if calls:
        marks = ", ".join("?" * len(calls))
        try:
            found = conn.execute(
                "SELECT exchange_id, name, arguments_json, result, error, approved, seconds FROM tool_calls "
                f"WHERE exchange_id IN ({marks}) ORDER BY id",
                list(calls),
            ).fetchall()
        except sqlite3.OperationalError:  # a file of a gatecell before tools, opened read-only
            found = []
        for exchange, name, arguments, result, error, approved, seconds in found:
            calls[exchange].append(
                {
                    "name": name,
                    "arguments": _loads(arguments),
                    "result": result,
                    "error": error,
                    "approved": None if approved is None else bool(approved),
                    "seconds": seconds,
                }
            )
    for row in rows:
        row["tool_calls"] = calls[row["id"]]
    return rows


def chain(conn: sqlite3.Connection, chain_id: str) -> dict[str, Any] | None:
    """A tool chain as the log has it (for ``gw.resume``): its calls, oldest first, and the
    exchange whose answer asked for the last round's (its request and answer); None when the
    log has no call of it."""
    try:
        calls = conn.execute(
            "SELECT exchange_id, round, call_id, name, arguments_json, result, error FROM tool_calls "
            "WHERE chain = ? ORDER BY id",
            (chain_id,),
        ).fetchall()
    except sqlite3.OperationalError:  # a file of a gatecell before tools
        return None
    if not calls:
        return None
    asked = conn.execute(
        "SELECT endpoint, model, api, params_json, prompt, messages_json, response_json "
        "FROM exchanges WHERE id = ?",
        (calls[-1][0],),
    ).fetchone()
    return {
        "calls": [
            {"round": r, "call_id": c, "name": n, "arguments": _loads(a), "result": res, "error": err}
            for _, r, c, n, a, res, err in calls
        ],
        "exchange": None
        if asked is None
        else {
            "endpoint": asked[0],
            "model": asked[1],
            "api": asked[2],
            "params": _loads(asked[3]) or {},
            "prompt": asked[4],
            "messages": _loads(asked[5]),
            "response": _loads(asked[6]),
        },
    }


def conversation(conn: sqlite3.Connection, name: str) -> list[dict[str, Any]]:
    """The turns of conversation ``name`` in order, oldest first; failed exchanges left out
    (they added nothing to it), interrupted ones kept and marked ``partial``."""
    sql = f"SELECT {_EXCHANGE_FIELDS} FROM exchanges AS e WHERE conversation = ? AND error IS NULL"
    sql += " ORDER BY time, id"
    return [_exchange(row) for row in conn.execute(sql, (name,))]


_ROLES = {"system": "system", "user": "user", "assistant": "assistant", "model": "assistant"}


def chat_messages(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A logged turn's whole conversation in chat form, system prompt first and the reply
    last, whichever text API carried it: chat ``messages``; native ``messages`` and
    ``system``; generate-content ``contents`` and ``systemInstruction``; responses ``input``
    and ``instructions`` (``%gatecell restore`` brings it back from this). A turn that held
    pictures or files keeps them as a list (`wire.conversation.neutral`): the pictures
    themselves when the log kept their bytes (``log_media``), else a line saying what was
    there."""
    params = row.get("params") or {}
    instruction = params.get("systemInstruction")
    system = text_of(params.get("system") or params.get("instructions")) or text_of(
        instruction.get("parts") if isinstance(instruction, dict) else None
    )
    messages = [{"role": "system", "content": system}] if system else []
    sent = row.get("messages")
    if isinstance(sent, list):
        for item in sent:
            role = _ROLES.get(item.get("role", "user")) if isinstance(item, dict) else None
            content = _content(item.get("content", item.get("parts"))) if role else None
            if role and content is not None:
                messages.append({"role": role, "content": content})
    elif row.get("prompt") is not None:
        messages.append({"role": "user", "content": row["prompt"]})
    messages.append({"role": "assistant", "content": row.get("response") or ""})
    return messages


def _content(content: Any) -> Any:
    """A logged content: its text, or, when it held more than text, its items read back."""
    text = text_of(content)
    if not isinstance(content, list) or all(
        isinstance(p, dict) and isinstance(p.get("text"), str) for p in content
    ):
        return text
    from gatecell.wire.apis.conversation import neutral
    from gatecell.wire.transport.errors import InvalidRequest

    items = []
    for part in content:
        try:
            items.append(neutral(part))
        except InvalidRequest:
            items.append("[a part the log holds but cannot read back]")
    return items


# -- usage --------------------------------------------------------------------------------


@dataclass(frozen=True)
class UsageRow:
    """Requests and tokens of one model on one UTC day, and what they cost: ``cost`` the sum
    of the known costs (None when none is known), ``cost_source`` where they came from
    (``gateway``, ``model-info``, ``prices``, several joined by ``+``), ``unpriced`` the
    requests with tokens whose cost is unknown."""

    day: str
    model: str | None
    requests: int
    errors: int
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    total_tokens: int
    cost: float | None
    cost_source: str | None = None
    unpriced: int = 0


def usage(
    conn: sqlite3.Connection, since: str | None = None, prices: dict[str, Price] | None = None
) -> list[UsageRow]:
    """Per UTC day and model, oldest first, of the requests actually sent (cache hits cost
    nothing and are left out). ``since`` is a date (``YYYY-MM-DD``) or a UTC time, inclusive.
    An exchange's cost is the one logged with it; one logged without is priced by ``prices``
    when the model has one (source ``prices``)."""
    sql = (
        "SELECT substr(time, 1, 10) AS day, model, count(*), count(error), "
        "total(prompt_tokens), total(completion_tokens), total(reasoning_tokens), total(total_tokens), "
        "total(cost), count(cost), group_concat(DISTINCT cost_source), "
        "total(CASE WHEN cost IS NULL THEN prompt_tokens END), "
        "total(CASE WHEN cost IS NULL THEN completion_tokens END), "
        "count(CASE WHEN cost IS NULL AND coalesce(prompt_tokens, completion_tokens) IS NOT NULL THEN 1 END) "
        # a cost past the bound (kept by an older gatecell: 1e308, inf) counts as unknown
        "FROM (SELECT time, model, error, prompt_tokens, completion_tokens, reasoning_tokens, total_tokens, "
        f"cost_source, CASE WHEN cost BETWEEN 0 AND {MAX_COST!r} THEN cost END AS cost "
        "FROM exchanges WHERE cached = 0"
    )
    args: list[Any] = []
    if since:
        sql += " AND time >= ?"
        args.append(since)
    sql += ") GROUP BY day, model ORDER BY day, model"
    rows = []
    for row in conn.execute(sql, args):
        day, model, requests, errors, prompt, completion, reasoning, total = row[:8]
        known, priced, sources, bare_prompt, bare_completion, unpriced = row[8:]
        cost = known if priced else None
        found = [name for name in SOURCES if name in (sources or "").split(",")]
        price = (prices or {}).get(model) if model else None
        extra = price.cost(int(bare_prompt), int(bare_completion)) if price is not None and unpriced else None
        if extra is not None and math.isfinite(extra):
            cost = (cost or 0.0) + extra
            found += [] if "prices" in found else ["prices"]
            unpriced = 0
        rows.append(
            UsageRow(
                day,
                model,
                requests,
                errors,
                int(prompt),
                int(completion),
                int(reasoning),
                int(total),
                cost,
                "+".join(found) or None,
                unpriced,
            )
        )
    return rows


def model_prices(conn: sqlite3.Connection) -> tuple[dict[tuple[str, str], Price], dict[str, str]]:
    """The prices the gateways' model info gave, by (gateway, model), and when each gateway
    was asked."""
    prices, asked = {}, {}
    for gateway, model, per_input, per_output, fetched in conn.execute(
        "SELECT gateway, model, input_cost_per_token, output_cost_per_token, fetched FROM model_prices"
    ):
        if model == "":
            asked[gateway] = fetched
        elif (price := per_token(per_input, per_output)) is not None:  # checked again: an older
            prices[(gateway, model)] = price  # gatecell kept what it was told
    return prices, asked


# -- jobs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredJob:
    """A job as last recorded: enough to poll it again from a new kernel."""

    kind: str
    job_id: str
    gateway: str
    model: str | None
    prompt: str | None
    state: str | None
    progress: float | None
    error: str | None
    notebook: str | None
    created: str
    updated: str
    body: Any  # the gateway's last body about it


_JOB_FIELDS = (
    "kind, job_id, gateway, model, prompt, state, progress, error, notebook, created, updated, body_json"
)


def _job(row: tuple[Any, ...]) -> StoredJob:
    kind, job_id, gateway, model, prompt, state, progress, error, notebook, created, updated, body = row
    return StoredJob(
        kind, job_id, gateway, model, prompt, state, progress, error, notebook, created, updated, _loads(body)
    )


def jobs(conn: sqlite3.Connection, limit: int | None = 20, kind: str | None = None) -> list[StoredJob]:
    """The most recently updated jobs first."""
    sql = f"SELECT {_JOB_FIELDS} FROM jobs"
    args: list[Any] = []
    if kind:
        sql += " WHERE kind = ?"
        args.append(kind)
    sql += " ORDER BY updated DESC, id DESC"
    if limit:
        sql += " LIMIT ?"
        args.append(limit)
    return [_job(tuple(row)) for row in conn.execute(sql, args)]


def job(
    conn: sqlite3.Connection, job_id: str, kind: str | None = None, gateway: str | None = None
) -> StoredJob | None:
    """The job with this id, of ``gateway`` when given (its root address, or ``local``), else
    of any gateway (the newest if several share it)."""
    sql = f"SELECT {_JOB_FIELDS} FROM jobs WHERE job_id = ?"
    args: list[Any] = [job_id]
    if kind:
        sql += " AND kind = ?"
        args.append(kind)
    if gateway is not None:
        sql += " AND gateway = ?"
        args.append(gateway_address(gateway))
    row = conn.execute(sql + " ORDER BY updated DESC, id DESC LIMIT 1", args).fetchone()
    return _job(tuple(row)) if row else None
