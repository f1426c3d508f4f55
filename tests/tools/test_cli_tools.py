"""``gatecell chat --tool FILE:FUNCTION`` as a real subprocess against the local gateway:
each call one line on stderr, the answer on stdout; without --yes and no terminal, denied."""

from __future__ import annotations

import os
import subprocess
import sys

TOOLS = '''
def order_status(order_id: str) -> str:
    """Where an order is now, by its id."""
    with open(__file__ + ".calls", "a") as f:
        f.write(order_id + "\\n")
    return f"order {order_id} is in Lyon"
'''


def gatecell(local_gateway, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_"))}
    env |= {"GATECELL_BASE_URL": local_gateway.base_url, "GATECELL_API_KEY": local_gateway.api_key.reveal()}
    command = [sys.executable, "-m", "gatecell", *args]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


def test_chat_runs_a_tool_named_on_the_command_line(local_gateway, tmp_path) -> None:
    module = tmp_path / "orders.py"
    module.write_text(TOOLS)
    done = gatecell(
        local_gateway, "chat", "--tool", f"{module}:order_status", "--yes", "Where is order A-1027?"
    )
    assert done.returncode == 0, done.stderr
    assert "→ order_status(order_id='A-1027')  ✓ " in done.stderr
    assert "order A-1027 is in Lyon" in done.stdout
    assert (tmp_path / "orders.py.calls").read_text() == "A-1027\n"

    denied = gatecell(local_gateway, "chat", "--tool", f"{module}:order_status", "Where is order B-9?")
    assert denied.returncode == 0, denied.stderr
    assert "no terminal to ask, so it is denied" in denied.stderr
    assert "B-9" not in (tmp_path / "orders.py.calls").read_text()


def test_a_tool_that_cannot_be_loaded_is_one_line(local_gateway, tmp_path) -> None:
    for spec, words in [
        ("nowhere", "--tool: give MODULE:FUNCTION, got 'nowhere'"),
        (f"{tmp_path}/missing.py:f", "--tool: no Python file"),
        ("json:no_such_function", "--tool: json has no 'no_such_function'"),
    ]:
        done = gatecell(local_gateway, "chat", "--tool", spec, "hi")
        assert done.returncode == 1 and words in done.stderr and done.stderr.count("\n") == 1, done.stderr
