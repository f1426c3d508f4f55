"""The store in the notebook: ``%gatecell log``, ``usage``, ``jobs``, ``export`` and
``restore``, and what a call's log row learns from the notebook.

Everything in the log came from a gateway or a model (or was typed by the user): tables go
through `display.show_table`, whose every cell is shown as written, never as Markdown or
HTML. The store is read through `gatecell.store` (loaded on first use, not at
``%load_ext``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .display import show_table

__all__ = ["notebook_path", "calls_in", "show_log", "show_usage", "show_jobs", "export", "restore"]


def notebook_path(shell: Any = None) -> str | None:
    """The notebook's path when the kernel knows it and only the notebook layer can tell:
    VS Code puts it in the namespace as ``__vsc_ipynb_file__`` (a Jupyter Server kernel has
    ``JPY_SESSION_NAME``, which the client reads itself)."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    path = getattr(shell, "user_ns", {}).get("__vsc_ipynb_file__")
    return path if isinstance(path, str) and path else None


@contextmanager
def calls_in(shell: Any, *, conversation: str | None = None, cache: bool | None = None) -> Iterator[None]:
    """Calls made in the block are logged with the notebook's path (when the kernel knows
    it) and this conversation, and answered from the cache when ``cache`` is True; what is
    not given stays as around the block (see `gatecell.journal`)."""
    from gatecell.journal import call_context

    given = {"notebook": notebook_path(shell), "conversation": conversation, "cache": cache}
    with call_context(**{name: value for name, value in given.items() if value is not None}):
        yield


def _store() -> Any:
    from gatecell import store

    return store.default_store()


def show_log(n: int, q: str | None, model: str | None, conversation: str | None) -> None:
    """The last ``n`` exchanges (matching ``q``...), oldest first, as a table."""

    st = _store()
    rows = st.logs(n=n, q=q, model=model, conversation=conversation)
    if not rows:
        print("nothing logged yet" if not (q or model or conversation) else "no exchange matches")
        return
    note = f"The log is `{st.path}`; `gatecell logs -n {n}` shows the exchanges whole."
    _show_rows(list(reversed(rows)), note)


def show_similar(gateway: Any, text: str, n: int) -> None:
    """The ``n`` exchanges nearest ``text`` by meaning, best first, as a table with their
    similarity (the log's prompts and replies embedded once, kept: see
    `gatecell.batch.meaning.similar_exchanges`)."""
    from gatecell.batch.meaning import similar_exchanges

    st = _store()
    rows = similar_exchanges(gateway, st, text, n)
    if not rows:
        print("nothing logged yet")
        return
    note = f"`gatecell logs --similar TEXT -n {n}` shows the exchanges whole."
    _show_rows(rows, note, similarity=True)


def _show_rows(rows: list[dict[str, Any]], note: str, similarity: bool = False) -> None:
    from gatecell.store.report import short

    table = []
    for row in rows:
        usage = row["usage"] or {}
        flags = [f for f in ("cached" if row["cached"] else "", "partial" if row["partial"] else "") if f]
        if row.get("tool_calls"):
            flags.append(f"{len(row['tool_calls'])} tool call{'s' if len(row['tool_calls']) > 1 else ''}")
        table.append(
            (
                row["time"].replace("T", " ")[:19],
                row["model"] or "-",
                row["api"] or row["endpoint"],
                row["conversation"] or "",
                short(row["prompt"], 60),
                short(row["error"] or row["response"], 80),
                "" if usage.get("total_tokens") is None else str(usage["total_tokens"]),
                "" if row["latency"] is None else f"{row['latency']:.2f} s",
                " ".join(flags),
            )
            + ((f"{row['similarity']:.3f}",) if similarity else ())
        )
    headers = ["time (UTC)", "model", "api", "conversation", "prompt", "reply or error", "tokens", "latency"]
    headers.append("")  # cached, partial
    if similarity:
        headers.append("similarity")
    show_table(headers, table, note=note)


def show_usage(since: str | None, prices: Any) -> None:
    """Requests, tokens and cost per day and model: each request's cost as logged (its
    gateway's figure, or its model info's prices), else by ``%config Gatecell.prices`` (a
    file, or a table), else ``GATECELL_PRICES``; its source beside it."""
    from gatecell.store import settings
    from gatecell.store.prices import load_prices, prices_from
    from gatecell.store.report import since_value, usage_cells

    if isinstance(prices, dict):
        table = prices_from(prices, "Gatecell.prices")
    else:
        path = Path(prices).expanduser() if prices else settings().prices
        table = load_prices(path) if path else {}
    rows = _store().usage(since=since_value(since) if since else None, prices=table)
    if not rows:
        print("nothing logged yet" if not since else f"nothing logged since {since}")
        return
    header, body = usage_cells(rows, with_cost=bool(prices) or settings().prices is not None)
    show_table(header, body, note="Days are UTC; cache hits cost nothing and are not counted.")


def show_jobs(n: int) -> None:
    from gatecell.store.report import jobs_cells

    jobs = _store().jobs(n)
    if not jobs:
        print("no job logged yet")
        return
    header, body = jobs_cells(jobs)
    show_table(header, body, note="Pick one up with `%gatecell job ID`, in this kernel or another.")


def export(name: str, path: str | None, *, force: bool = False) -> None:
    """Write conversation ``name`` from the log: Markdown, or JSON Lines for a ``.jsonl``
    or ``.ndjson`` path (one exchange per line, the keys of ``gatecell logs --json``).

    The file is new and 0600 (the conversation is as private as the log). An existing file
    is refused unless ``force`` (``export default mynb.ipynb`` must not replace the
    notebook); a symbolic link is never followed, nor replaced; a missing folder is one line.
    """
    from IPython.core.error import UsageError

    from gatecell.store.report import exchange_text, json_line

    from .display import safe_name

    turns = _store().conversation(name)
    if not turns:
        print(f"no conversation named {name!r} in the log")
        return
    target = Path(path).expanduser() if path else Path(f"{safe_name(name, 'conversation')}.md")
    if target.suffix.lower() in (".jsonl", ".ndjson"):
        text = "".join(json_line(turn) + "\n" for turn in turns)
    else:
        text = f"# Conversation {name}\n\n" + "\n".join(exchange_text(turn) for turn in turns)
    from gatecell.wire.util.private import write_output

    try:
        write_output(target, text.encode("utf-8"), force=force)
    except FileExistsError:
        raise UsageError(f"%gatecell export: {target} exists; add --force to replace it") from None
    except FileNotFoundError:
        raise UsageError(f"%gatecell export: no folder {target.parent} to write {target.name} in") from None
    except IsADirectoryError:
        raise UsageError(f"%gatecell export: {target} is a folder; give a file name") from None
    except OSError as exc:
        raise UsageError(f"%gatecell export: cannot write {target}: {exc.strerror or exc}") from None
    print(f"wrote the {len(turns)} exchanges of conversation {name!r} to {target}")


def restore(name: str, memory: Any) -> None:
    """Bring conversation ``name`` back into ``memory`` as it was last sent, with its reply:
    ``%%chat -c NAME`` goes on from there (after a kernel restart, say)."""
    from gatecell.store.queries import chat_messages

    from .memory import Conversation, Turn

    turns = [t for t in _store().conversation(name) if t["response"] or not t["partial"]]
    if not turns:
        print(f"no conversation named {name!r} in the log")
        return
    last = turns[-1]
    conversation = Conversation(name)
    messages = chat_messages(last)
    for i, message in enumerate(messages):
        partial = last["partial"] and i == len(messages) - 1
        conversation.turns.append(Turn(message["role"], message["content"], partial=partial))
    memory.conversations[name] = conversation
    count = sum(t.role == "user" for t in conversation.turns)
    when = last["time"].replace("T", " ")[:19]
    turns_said = f"{count} turn" + ("" if count == 1 else "s")
    print(f"restored conversation {name!r}: {turns_said}, the last at {when} UTC with {last['model']}")
