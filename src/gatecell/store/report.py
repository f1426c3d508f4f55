"""The store's records as terminal text and JSON lines: what ``gatecell logs``, ``usage``
and ``jobs`` print (and what the notebook's ``%gatecell log`` can show).

What the log holds came from gateways and models: every text made here for a terminal or a
file goes through `gatecell.wire.util._terminal.printable`, so control sequences in it are shown
escaped, never obeyed (a JSON line keeps its escapes valid JSON)."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import date, datetime, timezone
from typing import Any

from gatecell.wire.transport.errors import InvalidRequest, echo
from gatecell.wire.util._terminal import printable

from .queries import StoredJob, UsageRow
from .records import iso

__all__ = [
    "exchange_text",
    "usage_cells",
    "money",
    "usage_table",
    "jobs_cells",
    "jobs_table",
    "json_line",
    "since_value",
    "short",
]


def json_line(record: Any) -> str:
    """One record as one line of strict JSON (dataclasses as objects, non-ASCII kept): a
    float that is not finite is ``null``, never ``Infinity`` or ``NaN``, which JSON has not."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        record = dataclasses.asdict(record)
    try:
        text = json.dumps(record, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:  # a value not finite somewhere (a typed answer's NaN, say)
        text = json.dumps(_finite(record), ensure_ascii=False, default=str, allow_nan=False)
    return printable(text)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def since_value(text: str) -> str:
    """``--since``: a date (``2026-01-31``) or a time (``2026-01-31T12:00``, UTC unless it
    says otherwise), as the text the log's times compare with."""
    value = text.strip()
    try:
        if len(value) == 10:
            return date.fromisoformat(value).isoformat()
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidRequest(
            "since", f"must be a date (YYYY-MM-DD) or an ISO time, got {echo(text)}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return iso(moment.timestamp())


def _tokens(usage: dict[str, Any] | None) -> str | None:
    if not usage:
        return None
    text = f"{usage['prompt_tokens'] or 0} prompt + {usage['completion_tokens'] or 0} completion"
    if usage.get("reasoning_tokens"):
        text += f" ({usage['reasoning_tokens']} reasoning)"
    return f"{text} = {usage['total_tokens']} tokens" if usage.get("total_tokens") is not None else text


def exchange_text(row: dict[str, Any]) -> str:
    """One exchange as Markdown: a heading of when, what and where, the prompt, the reply."""
    time = row["time"].replace("T", " ")[:19] + " UTC"
    head = f"## {time} · {row['model'] or '-'} · {row['endpoint']}"
    tags = [
        f"conversation {row['conversation']}" if row["conversation"] else None,
        "cached" if row["cached"] else None,
        "partial" if row["partial"] else None,
        row["notebook"],
    ]
    lines = [head]
    if any(tags):
        lines.append(" · ".join(t for t in tags if t))
    lines += ["", "### Prompt", "", row["prompt"] or "(none)", ""]
    if row["reasoning"]:
        lines += ["### Reasoning", "", row["reasoning"], ""]
    if row["error"]:
        lines += ["### Error", "", row["error"], ""]
    if row["response"] is not None or not row["error"]:
        lines += ["### Response", "", row["response"] or "", ""]
    if row.get("tool_calls"):
        lines += ["### Tool calls", ""]
        for call in row["tool_calls"]:
            arguments = call["arguments"]
            shown = (
                ", ".join(f"{k}={v!r}" for k, v in arguments.items()) if isinstance(arguments, dict) else ""
            )
            outcome = f"✗ {call['error']}" if call["error"] else f"✓ {short(call['result'] or '', 80)}"
            lines.append(f"- {call['name']}({short(shown, 120)})  {outcome}")
        lines.append("")
    if row.get("schema"):
        value = (
            json.dumps(row["parsed"], ensure_ascii=False)
            if row["parsed"] is not None
            else "(none: it did not validate)"
        )
        lines += [f"### Parsed as {row['schema']}", "", value, ""]
    if row["media"]:
        media = row["media"]
        lines += [
            f"media: {media['type'] or 'unknown type'}, {media['size']} bytes, sha256 {media['sha256']}"
        ]
    facts = [
        _tokens(row["usage"]),
        f"{row['latency']:.2f} s" if row["latency"] is not None else None,
        f"status {row['status']}" if row["status"] is not None else None,
        f"request {row['request_id']}" if row["request_id"] else None,
    ]
    if any(facts):
        lines.append(" · ".join(f for f in facts if f))
    return printable("\n".join(lines).rstrip() + "\n")


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> str:
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def money(dollars: float) -> str:
    """US dollars as the tables show them: to the millionth (a request costs fractions of a cent)."""
    return f"{dollars:.6f}"


def usage_cells(rows: list[UsageRow], with_cost: bool) -> tuple[list[str], list[list[str]]]:
    """The header and cells of the usage table (the terminal's and the notebook's); a cost
    column and its source when prices were given or a cost is known: ``unknown`` where none
    is, and how many requests are unknown where some are."""
    header = ["day", "model", "requests", "errors", "prompt", "completion", "reasoning", "total"]
    body = [
        [
            r.day,
            r.model or "-",
            *map(str, (r.requests, r.errors, r.prompt_tokens, r.completion_tokens, r.reasoning_tokens)),
            str(r.total_tokens),
        ]
        for r in rows
    ]
    if with_cost or any(r.cost is not None for r in rows):
        header += ["cost ($)", "source"]
        for cells, r in zip(body, rows, strict=True):
            source = r.cost_source or "-"
            if r.unpriced and r.cost is not None:
                source += f", {r.unpriced} unknown"
            cells += ["unknown" if r.cost is None else money(r.cost), source]
    return header, body


def usage_table(rows: list[UsageRow], with_cost: bool) -> str:
    """Requests and tokens per day and model; a cost column when prices were given or a
    cost is known."""
    header, body = usage_cells(rows, with_cost)
    return _table(header, body, right=set(range(2, len(header) - (header[-1] == "source"))))


def short(text: str | None, width: int = 40) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def jobs_cells(jobs: list[StoredJob]) -> tuple[list[str], list[list[str]]]:
    """The header and cells of the jobs table, most recently updated first."""
    header = ["updated", "kind", "id", "state", "progress", "prompt", "gateway"]
    body = [
        [
            j.updated.replace("T", " ")[:19],
            j.kind,
            j.job_id,
            j.state or "-",
            "-" if j.progress is None else f"{j.progress:.0f}%",
            short(j.prompt),
            j.gateway or "-",
        ]
        for j in jobs
    ]
    return header, body


def jobs_table(jobs: list[StoredJob]) -> str:
    """The jobs, most recently updated first."""
    header, body = jobs_cells(jobs)
    return _table(header, body, right={4})
