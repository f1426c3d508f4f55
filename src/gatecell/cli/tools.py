"""``gatecell chat --tool MODULE:FUNCTION`` (and ``--mcp NAME``, ``--yes``): the functions
named on the command line offered to the model; each call one line on stderr as it ends;
asked about on the terminal first unless ``--yes`` (with no terminal to ask, denied)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from gatecell.wire.transport.errors import InvalidRequest
from gatecell.wire.util._terminal import printable

__all__ = ["add_options", "options_of"]


def add_options(chat: argparse.ArgumentParser) -> None:
    chat.add_argument(
        "--tool",
        action="append",
        metavar="MODULE:FUNCTION",
        help="offer this Python function (or Toolbox) to the model; MODULE may be a .py file",
    )
    chat.add_argument(
        "--mcp", action="append", metavar="NAME", help="offer this MCP server's tools (mcp.json)"
    )
    chat.add_argument("--yes", action="store_true", help="run the tools' calls without asking")
    chat.add_argument("--max-rounds", type=int, default=8, help="at most N requests in a tool chain (8)")


def load(spec: str) -> Any:
    """The object ``MODULE:NAME`` names (MODULE a module name or a .py file); one line when not."""
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise InvalidRequest("--tool", f"give MODULE:FUNCTION, got {spec!r}")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            found = importlib.util.spec_from_file_location(path.stem, path)
            if found is None or found.loader is None or not path.is_file():
                raise InvalidRequest("--tool", f"no Python file {module_name!r}")
            module = importlib.util.module_from_spec(found)
            found.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidRequest("--tool", f"cannot import {module_name!r}: {exc}") from None
    if not hasattr(module, name):
        raise InvalidRequest("--tool", f"{module_name} has no {name!r}")
    return getattr(module, name)


def _approve(yes: bool) -> Any:
    def approve(call: Any) -> bool:
        if yes or (call.tool is not None and call.tool.safe and not call.tool.ask):
            return True
        if not sys.stdin.isatty():
            print(
                printable(f"→ {call.line()}: no terminal to ask, so it is denied (--yes allows it)"),
                file=sys.stderr,
            )
            return False
        return input(printable(f"run {call.line()}? [y/N] ")).strip().lower() in ("y", "yes")

    return approve


def _shown(stream: bool) -> Any:
    def on_event(event: Any) -> None:
        if isinstance(event, str):
            if stream:
                sys.stdout.write(printable(event))
                sys.stdout.flush()
            return
        if event.error is not None or event.output:
            status = f"✗ {event.error}" if event.error is not None else f"✓ {event.seconds:.2f} s"
            print(printable(f"→ {event.line()}  {status}"), file=sys.stderr)

    return on_event


def options_of(args: argparse.Namespace) -> dict[str, Any]:
    """The chain's keyword arguments of ``args``; empty without ``--tool`` or ``--mcp``."""
    if not args.tool and not args.mcp:
        return {}
    tools: list[Any] = [load(spec) for spec in args.tool or ()]
    if args.mcp:
        from gatecell.tools.mcp import servers_tools

        try:
            tools += servers_tools(args.mcp)
        except (ValueError, RuntimeError) as exc:  # not configured; did not start
            raise InvalidRequest("--mcp", str(exc)) from None
    return {
        "tools": tools,
        "approve": _approve(args.yes),
        "max_rounds": args.max_rounds,
        "on_event": _shown(not args.no_stream),
    }
