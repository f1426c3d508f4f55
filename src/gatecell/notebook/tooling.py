"""``%%chat --tools f,g`` (and ``--mcp NAME``, ``--yes``): the tools named in the notebook,
each call shown as one line in the cell as it happens, and the user's say before it runs.

A line reads ``→ order_status(order_id='A-1027')  ✓ 0.01 s`` once the call ended, the result
folded under it (``✗`` and the one-line error when it failed); everything a model or a tool sent is
HTML-escaped. A call runs only after the user says yes (``run …? [y/N]`` on the cell's input),
unless ``--yes``, the tool is ``safe=True`` (and not an MCP tool), or
``%config Gatecell.approve_tools = False``; a frontend that cannot ask (nbconvert, voilà)
denies, and the line says to use ``--yes``.
"""

from __future__ import annotations

import builtins
import html
from collections.abc import Callable
from typing import Any

from IPython.core.error import StdinNotImplementedError, UsageError

__all__ = ["tools_named", "ToolLines", "asker", "mcp_command"]


def tools_named(names: str, namespace: dict[str, Any]) -> list[Any]:
    """The functions, lists and `Toolbox` objects ``names`` (comma separated) name in the
    notebook; an unknown or unfit name is one line, before anything is sent."""
    from gatecell.tools import as_tools
    from gatecell.wire.transport.errors import InvalidRequest

    found = []
    for name in (n.strip() for n in names.split(",")):
        if not name:
            continue
        if name not in namespace:
            raise UsageError(f"%chat --tools: no function {name!r} in the notebook")
        found.append(namespace[name])
    try:
        as_tools(found)
    except InvalidRequest as exc:
        raise UsageError(f"%chat --tools: {exc.message}") from None
    return found


def asker(yes: bool, approve_tools: bool) -> Callable[[Any], bool]:
    """The notebook's say on each call (see the module). ``input`` is looked up when asking:
    a kernel puts its own in place while a cell runs."""

    def approve(call: Any) -> bool:
        tool = call.tool
        if yes or (tool is not None and not tool.ask and (tool.safe or not approve_tools)):
            return True
        try:
            answer = builtins.input(f"run {call.line()}? [y/N] ")
        except (StdinNotImplementedError, EOFError):
            print(f"→ {call.line()}: this frontend cannot ask, so it is denied (--yes allows every call)")
            return False
        return answer.strip().lower() in ("y", "yes")

    return approve


class ToolLines:
    """Shows each call as one line once it ended (HTML with its result folded, or text). A
    line is shown once, never updated, and the answer comes whole after the lines (the text
    of the rounds before it is not the answer): a saved notebook keeps what was seen."""

    def __init__(self, rich: bool) -> None:
        self.rich = rich

    def __call__(self, event: Any) -> None:
        if isinstance(event, str) or (not event.output and event.error is None):
            return  # a text piece, or a call that started: its line comes when it ends
        if not self.rich:
            print(line_text(event))
            return
        from IPython.display import display

        display({"text/html": line_html(event), "text/plain": line_text(event)}, raw=True)


def _status(call: Any) -> str:
    return f"✗ {call.error}" if call.error is not None else f"✓ {call.seconds:.2f} s"


def line_text(call: Any) -> str:
    return f"→ {call.line()}  {_status(call)}"


def line_html(call: Any) -> str:
    line = html.escape(line_text(call))
    if call.error is None and call.output:
        result = html.escape(call.output)
        return f"<details><summary><code>{line}</code></summary><pre>{result}</pre></details>"
    return f"<div><code>{line}</code></div>"


def mcp_command(action: str, words: list[str]) -> Any:
    """``%gatecell mcp ...``: list the servers; add one for this kernel; a server's prompt or
    resource as text (the cell's value: ``{_}`` puts it in the next prompt)."""
    from gatecell.tools import mcp

    try:
        if action == "list":
            rows = mcp.listing()
            if not rows:
                print(f"no MCP server: name them in {mcp.config_path()} or with %gatecell mcp add ...")
            for row in rows:
                tools = "not started" if row["tools"] is None else ", ".join(row["tools"]) or "no tools"
                print(f"{row['name']}  ({row['transport']}: {row['where']})  {tools}")
            return None
        if action == "add":
            if len(words) < 3 or words[1] != "--":
                raise UsageError("%gatecell mcp add NAME -- COMMAND [ARGS...]")
            mcp.add_server(words[0], {"command": words[2], "args": words[3:]})
            print(f"MCP server {words[0]!r} added for this kernel: %%chat --mcp {words[0]} offers its tools")
            return None
        if action == "prompt":
            if len(words) < 2 or not all("=" in w for w in words[2:]):
                raise UsageError("%gatecell mcp prompt NAME PROMPT [KEY=VALUE...]")
            arguments = dict(w.split("=", 1) for w in words[2:])
            return mcp.get_prompt(words[0], words[1], arguments)
        if len(words) != 2:
            raise UsageError("%gatecell mcp read NAME URI")
        return mcp.read_resource(words[0], words[1])
    except (ValueError, RuntimeError) as exc:  # not configured, did not start, failed on its side
        raise UsageError(f"%gatecell mcp {action}: {exc}") from None
