"""MCP servers' tools as tools, through the official ``mcp`` SDK (``pip install 'gatecell[mcp]'``).

Servers are named in an ``mcp.json`` in the ``mcpServers`` shape Claude Desktop, VS Code and
Cursor use (``GATECELL_MCP_CONFIG``, else ``GATECELL_HOME/mcp.json``)::

    {"mcpServers": {
        "files": {"command": "python", "args": ["files_server.py"], "env": {"ROOT": "/data"}},
        "search": {"type": "http", "url": "https://example.org/mcp", "headers": {"X-Team": "a"}}
    }}

A command is a server over stdio (a child process); a ``url`` one over streamable HTTP.
`server_tools` gives a server's tools as `Tool` values the loop runs like any other: each is
asked about before it runs (``ask``), since the user did not write it, and named as the
server names it. A server starts on first use, in one event loop of gatecell's own (a daemon
thread) whatever the caller's, and every server is stopped when the process exits. A server
that cannot start, dies or hangs is one line: when its tools are asked for, or as the
failed call's error (each call waits ``CALL_TIMEOUT`` seconds at most), never a hung cell.
What a server sends is data: its tools' results are text for the model, redacted and capped
by the loop like any result. `read_resource` and `get_prompt` give a server's resources and
prompts as text, to put in a prompt; `add_server` names one for this process only.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import importlib.util
import json
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from gatecell.wire.transport.errors import ConfigError, first_line
from gatecell.wire.transport.settings import env_number, home

from .functions import Tool

__all__ = [
    "config_path",
    "servers",
    "add_server",
    "listing",
    "server_tools",
    "servers_tools",
    "read_resource",
    "get_prompt",
    "stop_all",
    "CALL_TIMEOUT",
    "START_TIMEOUT",
    "MCPError",
]

CALL_TIMEOUT = 60.0  # seconds a call may take (GATECELL_MCP_TIMEOUT)
START_TIMEOUT = 30.0  # seconds a server may take to start and list its tools


class MCPError(RuntimeError):
    """An MCP server failed: it did not start, it died, or a call failed on its side."""


def config_path() -> Path:
    given = os.environ.get("GATECELL_MCP_CONFIG")
    return Path(given) if given else home() / "mcp.json"


_ADDED: dict[str, dict[str, Any]] = {}  # servers added in this process (`add_server`)


def add_server(name: str, spec: dict[str, Any]) -> None:
    """Name a server for this process (``%gatecell mcp add NAME -- CMD ARGS``), beside mcp.json's."""
    if not (isinstance(spec.get("command"), str) or isinstance(spec.get("url"), str)):
        raise ValueError(f"server {name!r} needs a command (stdio) or a url (streamable HTTP)")
    _ADDED[name] = spec


def servers() -> dict[str, dict[str, Any]]:
    """The servers by name: mcp.json's and those added in this process; a file that is not
    the ``mcpServers`` shape is one line."""
    return {**_configured(), **_ADDED}


def _configured() -> dict[str, dict[str, Any]]:
    path = config_path()
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a JSON file ({first_line(exc)})") from None
    found = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(found, dict):
        raise ConfigError(
            f'{path}: expected {{"mcpServers": {{"NAME": {{"command": ...}} or {{"url": ...}}}}}}'
        )
    for name, spec in found.items():
        if not isinstance(spec, dict) or not (
            isinstance(spec.get("command"), str) or isinstance(spec.get("url"), str)
        ):
            raise ConfigError(
                f'{path}: server {name!r} needs a "command" (stdio) or a "url" (streamable HTTP)'
            )
    return found


# -- the event loop the servers live in -------------------------------------------------------


class _Loop:
    """One event loop in a daemon thread, started on first use."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def run(self, coroutine: Any) -> Future[Any]:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name="gatecell-mcp", daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)


_LOOP = _Loop()


class _Server:
    """One running server: its session lives in a task of its own (the SDK's transports must
    be entered and left by one task), which holds it open until `stop`."""

    def __init__(self, name: str, spec: dict[str, Any]) -> None:
        self.name = name
        self.spec = spec
        self.session: Any = None
        self.tools: list[Any] = []
        self._stop: asyncio.Event | None = None
        self._done: Future[Any] | None = None

    def start(self) -> None:
        ready: Future[None] = Future()
        self._done = _LOOP.run(self._hold(ready))
        try:
            ready.result(env_number(None, "GATECELL_MCP_START_TIMEOUT", START_TIMEOUT))
        except TimeoutError:
            self.stop()
            raise MCPError(f"MCP server {self.name!r} did not start within {START_TIMEOUT:g} s") from None
        except Exception as exc:
            raise MCPError(f"MCP server {self.name!r} did not start: {_reason(exc)}") from None

    async def _hold(self, ready: Future[None]) -> None:
        from contextlib import AsyncExitStack

        from mcp import ClientSession

        self._stop = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                read, write = await self._open(stack)
                self.session = await stack.enter_async_context(ClientSession(read, write))
                await self.session.initialize()
                self.tools = (await self.session.list_tools()).tools
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:  # the SDK's task groups raise groups: one line for the caller
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else MCPError(str(exc)))
            self.session = None
        finally:
            self.session = None

    async def _open(self, stack: Any) -> tuple[Any, Any]:
        spec = self.spec
        if isinstance(spec.get("command"), str):
            from mcp.client.stdio import StdioServerParameters, stdio_client

            parameters = StdioServerParameters(
                command=spec["command"],
                args=[str(a) for a in spec.get("args") or ()],
                env={str(k): str(v) for k, v in (spec.get("env") or {}).items()} or None,
                cwd=spec.get("cwd"),
            )
            streams = await stack.enter_async_context(stdio_client(parameters, errlog=_quiet()))
        else:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            headers = {str(k): str(v) for k, v in (spec.get("headers") or {}).items()}
            client = await stack.enter_async_context(create_mcp_http_client(headers=headers))
            streams = await stack.enter_async_context(streamable_http_client(spec["url"], http_client=client))
        return streams[0], streams[1]

    def ask(self, request: Callable[[Any], Any], timeout: float) -> Any:
        """What ``request(session)`` (a coroutine) gives, within ``timeout`` seconds; one line when not."""
        if self.session is None:
            raise MCPError(f"MCP server {self.name!r} is not running (it stopped or died)")
        future = _LOOP.run(request(self.session))
        try:
            return future.result(timeout + 1)
        except TimeoutError:
            future.cancel()
            raise MCPError(f"MCP server {self.name!r} gave no answer within {timeout:g} s") from None
        except Exception as exc:
            raise MCPError(f"MCP server {self.name!r}: {_reason(exc)}") from None

    def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> str:
        result = self.ask(
            lambda session: session.call_tool(tool, arguments, read_timeout_seconds=timeout), timeout
        )
        text = _text(result.content)
        if _field(result, "is_error"):
            raise MCPError(text or "the tool failed")
        structured = _field(result, "structured_content")
        return text if text or structured is None else json.dumps(structured)

    def stop(self) -> None:
        stop, done = self._stop, self._done
        if stop is not None and _LOOP._loop is not None:
            _LOOP._loop.call_soon_threadsafe(stop.set)
        if done is not None:
            try:
                done.result(5)
            except Exception:
                pass  # a server that will not stop is the OS's at exit: its pipes close with us


def _field(value: Any, name: str) -> Any:
    """A field of the SDK's types by its 2.x name (``input_schema``), else its 1.x one (``inputSchema``)."""
    camel = name.split("_")[0] + "".join(w.title() for w in name.split("_")[1:])
    return getattr(value, name, None) if hasattr(value, name) else getattr(value, camel, None)


def _reason(exc: BaseException) -> str:
    """One line for what the SDK raised (often an exception group around the real cause)."""
    while getattr(exc, "exceptions", None):  # an ExceptionGroup (3.11) without naming it (3.10)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return f"{type(exc).__name__}: {first_line(exc)}"


def _text(content: Any) -> str:
    parts = []
    for item in content or ():
        text = getattr(item, "text", None)
        if isinstance(text, str):
            parts.append(text)
        else:  # an image, audio, a resource: named, not inlined
            parts.append(f"[{getattr(item, 'type', 'content')}]")
    return "\n".join(parts)


def _quiet() -> Any:
    """Where a stdio server's stderr goes: nowhere (its own log lines are not the cell's)."""
    return open(os.devnull, "w")


_RUNNING: dict[str, _Server] = {}
_STARTING = threading.Lock()


def _running(name: str) -> _Server:
    with _STARTING:
        server = _RUNNING.get(name)
        if server is None or server.session is None:
            spec = servers().get(name)
            if spec is None:
                known = ", ".join(sorted(servers())) or "none"
                raise ValueError(f"no MCP server {name!r} in {config_path()} (configured: {known})")
            server = _Server(name, spec)
            server.start()
            _RUNNING[name] = server
        return server


def server_tools(name: str) -> list[Tool]:
    """The tools of the configured server ``name`` (started now if it is not running): each
    asks before it runs; a call waits ``GATECELL_MCP_TIMEOUT`` seconds (60) at most."""
    if importlib.util.find_spec("mcp") is None:
        raise ConfigError("MCP servers need the mcp package: pip install 'gatecell[mcp]'")
    server = _running(name)
    timeout = _timeout()
    return [
        Tool(
            spec.name,
            " ".join((spec.description or "").split()),
            dict(_field(spec, "input_schema") or {"type": "object", "properties": {}}),
            _caller(server, spec.name, timeout),
            ask=True,
        )
        for spec in server.tools
    ]


def servers_tools(names: list[str]) -> list[Tool]:
    """The tools of several servers; a tool name two of them share is given as
    ``SERVER_TOOL`` for each (chat completions take no dot in a function's name)."""
    found = {name: server_tools(name) for name in names}
    seen: dict[str, int] = {}
    for tools in found.values():
        for tool in tools:
            seen[tool.name] = seen.get(tool.name, 0) + 1
    return [
        dataclasses.replace(tool, name=f"{server}_{tool.name}") if seen[tool.name] > 1 else tool
        for server, tools in found.items()
        for tool in tools
    ]


def read_resource(name: str, uri: str) -> str:
    """The text of the resource ``uri`` of server ``name`` (binary contents named, not inlined)."""
    result = _running(name).ask(lambda session: session.read_resource(uri), _timeout())
    return "\n".join(
        item.text
        if isinstance(getattr(item, "text", None), str)
        else f"[{_field(item, 'mime_type') or 'binary'}]"
        for item in result.contents
    )


def get_prompt(name: str, prompt: str, arguments: dict[str, str] | None = None) -> str:
    """The text of the prompt ``prompt`` of server ``name``, its messages one after another."""
    result = _running(name).ask(lambda session: session.get_prompt(prompt, arguments or {}), _timeout())
    return "\n\n".join(_text([message.content]) for message in result.messages)


def listing() -> list[dict[str, Any]]:
    """Each server: its name, how it is reached, and its tools when it is running."""
    found = []
    for name, spec in servers().items():
        running = _RUNNING.get(name)
        tools = (
            [t.name for t in running.tools] if running is not None and running.session is not None else None
        )
        where = spec.get("url") or " ".join([spec["command"], *map(str, spec.get("args") or ())])
        found.append(
            {
                "name": name,
                "transport": "http" if spec.get("url") else "stdio",
                "where": where,
                "tools": tools,
            }
        )
    return found


def _timeout() -> float:
    return env_number(None, "GATECELL_MCP_TIMEOUT", CALL_TIMEOUT)


def _caller(server: _Server, tool: str, timeout: float) -> Callable[..., str]:
    def call(**arguments: Any) -> str:
        return server.call(tool, arguments, timeout)

    call.__name__ = tool
    return call


def stop_all() -> None:
    """Stop every running server (at exit, and for tests)."""
    with _STARTING:
        running = list(_RUNNING.values())
        _RUNNING.clear()
    for server in running:
        server.stop()


atexit.register(stop_all)
