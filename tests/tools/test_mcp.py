"""MCP servers' tools, through the official SDK, against a real server (the SDK's MCPServer,
written below) over stdio and over streamable HTTP: tools listed and called in a chain,
asked about before they run, a server that dies or hangs mid-call is one line and a failed
call, and the server's process is gone after stop."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from tool_server import KEY

from gatecell.gateway import Gateway
from gatecell.tools import mcp

pytest.importorskip("mcp")

SERVER = '''
import os, sys, time
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("orders")

@server.tool()
def order_status(order_id: str) -> str:
    """Where an order is now, by its id."""
    with open(os.environ["CALLS_FILE"], "a") as f:
        f.write(order_id + "\\n")
    return f"order {order_id} is in Lyon"

@server.tool()
def weather(city: str, days: int = 1) -> str:
    """The weather in a city."""
    if city == "Atlantis":
        raise ToolError("no such city")
    return f"sun in {city}"

@server.resource("orders://today")
def today() -> str:
    """Today's orders."""
    return "A-1027, B-2201"

@server.prompt()
def review(order_id: str) -> str:
    """Ask for a review of one order."""
    return f"Review order {order_id} and say what is late."

@server.tool()
def crash() -> str:
    """Dies."""
    os._exit(3)

@server.tool()
def hang() -> str:
    """Never answers."""
    time.sleep(120)
    return "late"

if __name__ == "__main__":
    if "PID_FILE" in os.environ:
        with open(os.environ["PID_FILE"], "w") as f:
            f.write(str(os.getpid()))
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """An mcp.json naming the server over stdio ("orders") and over HTTP ("web", started here)."""
    script = tmp_path / "orders_server.py"
    script.write_text(SERVER)
    calls, pids = tmp_path / "calls.txt", tmp_path / "pid-stdio.txt"
    port = _free_port()
    env = {"CALLS_FILE": str(calls), "PID_FILE": str(pids)}
    web = subprocess.Popen(
        [sys.executable, str(script), "http", str(port)],
        env={**__import__("os").environ, "CALLS_FILE": str(calls), "PID_FILE": str(tmp_path / "pid-web.txt")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    config = {
        "mcpServers": {
            "orders": {"command": sys.executable, "args": [str(script)], "env": env},
            "web": {"type": "http", "url": f"http://127.0.0.1:{port}/mcp", "headers": {"X-Team": "a"}},
            "broken": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(2)"]},
        }
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config))
    monkeypatch.setenv("GATECELL_MCP_CONFIG", str(path))
    monkeypatch.setenv("GATECELL_MCP_TIMEOUT", "3")
    yield tmp_path
    mcp.stop_all()
    web.kill()
    web.wait()


@pytest.mark.parametrize("name", ["orders", "web"])
def test_a_servers_tools_run_in_a_chain_once_approved(configured, tool_server, name) -> None:
    tools = mcp.server_tools(name)
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"order_status", "weather", "crash", "hang"}
    assert by_name["order_status"].description == "Where an order is now, by its id."
    assert by_name["order_status"].parameters["required"] == ["order_id"] and by_name["order_status"].ask
    asked = []
    with Gateway(tool_server.base("one", uuid.uuid4().hex), KEY, log=False) as gw:
        r = gw.chat(
            "m",
            [{"role": "user", "content": "where?"}],
            tools=tools,
            approve=lambda c: asked.append(c.name) or True,
        )
    assert asked == ["order_status"]
    assert [(c.name, c.output, c.error) for c in r.tool_calls] == [
        ("order_status", "order A-1027 is in Lyon", None)
    ]
    assert (configured / "calls.txt").read_text() == "A-1027\n"


def test_without_approve_an_mcp_tool_does_not_run(configured, tool_server) -> None:
    with Gateway(tool_server.base("one", uuid.uuid4().hex), KEY, log=False) as gw:
        r = gw.chat("m", [{"role": "user", "content": "where?"}], tools=mcp.server_tools("orders"))
    assert r.tool_calls[0].error.startswith("this tool runs only when the user approves it")
    assert not (configured / "calls.txt").exists()


def test_a_tool_error_a_crash_and_a_hang_are_one_line_each(configured) -> None:
    by_name = {t.name: t for t in mcp.server_tools("orders")}
    with pytest.raises(mcp.MCPError, match="no such city"):
        by_name["weather"].function(city="Atlantis")
    started = time.monotonic()
    with pytest.raises(mcp.MCPError) as hung:
        by_name["hang"].function()
    assert "\n" not in str(hung.value) and time.monotonic() - started < 30
    with pytest.raises(mcp.MCPError) as crashed:
        by_name["crash"].function()
    assert "\n" not in str(crashed.value)
    with pytest.raises(mcp.MCPError):  # the dead server's tools fail at once, in one line
        by_name["order_status"].function(order_id="A-1")


def test_the_servers_process_is_gone_after_stop(configured) -> None:
    mcp.server_tools("orders")
    pid = int((configured / "pid-stdio.txt").read_text())
    mcp.stop_all()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        status = Path(f"/proc/{pid}/status").read_text() if Path(f"/proc/{pid}/status").exists() else ""
        if "zombie" in status:
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


def test_a_server_that_cannot_start_or_is_not_configured_is_one_line(configured) -> None:
    with pytest.raises(mcp.MCPError) as caught:
        mcp.server_tools("broken")
    assert str(caught.value).startswith("MCP server 'broken' did not start: ") and "\n" not in str(
        caught.value
    )
    with pytest.raises(
        ValueError, match="no MCP server 'nope' in .*mcp.json \\(configured: broken, orders, web\\)"
    ):
        mcp.server_tools("nope")


def test_the_command_line_names_a_server(configured, local_gateway, tmp_path) -> None:
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_"))}
    env |= {
        "GATECELL_BASE_URL": local_gateway.base_url,
        "GATECELL_API_KEY": local_gateway.api_key.reveal(),
        "GATECELL_MCP_CONFIG": os.environ["GATECELL_MCP_CONFIG"],
    }
    command = [sys.executable, "-m", "gatecell", "chat", "--mcp", "orders", "--yes", "Where is order A-1027?"]
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stderr
    assert "→ order_status(order_id='A-1027')  ✓ " in done.stderr and "order A-1027 is in Lyon" in done.stdout
    command[5] = "nope"
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 1 and done.stderr.startswith("gatecell: --mcp: no MCP server 'nope'"), (
        done.stderr
    )


def test_the_magic_lists_adds_and_reads_prompts_and_resources(configured, ipshell, capsys) -> None:
    from IPython.core.error import UsageError

    from gatecell.notebook.tooling import mcp_command

    mcp_command("list", [])
    listed = capsys.readouterr().out
    assert (
        "orders  (stdio: " in listed and "web  (http: http://127.0.0.1:" in listed and "not started" in listed
    )
    assert (
        mcp_command("prompt", ["orders", "review", "order_id=A-1027"])
        == "Review order A-1027 and say what is late."
    )
    assert mcp_command("read", ["orders", "orders://today"]) == "A-1027, B-2201"
    mcp_command("list", [])
    assert "order_status, weather" in capsys.readouterr().out  # running now: its tools listed
    script = configured / "orders_server.py"
    mcp_command("add", ["again", "--", sys.executable, str(script)])
    assert [t.name for t in mcp.server_tools("again")][:2] == ["order_status", "weather"]
    for words, line in [
        (["x", "python"], "%gatecell mcp add NAME -- COMMAND [ARGS...]"),
        (["orders", "review", "order_id"], "%gatecell mcp prompt NAME PROMPT [KEY=VALUE...]"),
    ]:
        with pytest.raises(UsageError, match=re.escape(line)):
            mcp_command("add" if words[0] == "x" else "prompt", words)
    with pytest.raises(UsageError, match="%gatecell mcp read: MCP server 'orders': "):
        mcp_command("read", ["orders", "orders://nothing"])
    ipshell.run_line_magic("gatecell", "mcp list")  # the magic itself takes the words
    assert "again  (stdio: " in capsys.readouterr().out
    mcp._ADDED.clear()


def test_tools_of_two_servers_that_share_names_are_named_by_server(configured) -> None:
    names = [t.name for t in mcp.servers_tools(["orders", "web"])]
    assert names == [
        f"{server}_{tool}"
        for server in ("orders", "web")
        for tool in ("order_status", "weather", "crash", "hang")
    ]
    assert [t.name for t in mcp.servers_tools(["orders"])] == ["order_status", "weather", "crash", "hang"]
