"""The notebook as context in a real kernel, checked where it arrives (a local gateway that
records every request): DataFrames, code in prompts, cells, errors, and code into a new cell."""

from __future__ import annotations

import json

import pytest
from kernels import displays, execute, running, stream_text

CHARS = 1500


@pytest.fixture(scope="module")
def kernel(tmp_path_factory, recording_gateway):
    with running(
        tmp_path_factory.mktemp("kernel"),
        GATECELL_BASE_URL=recording_gateway.base_url,
        GATECELL_API_KEY=recording_gateway.api_key.reveal(),
    ) as kc:
        run(kc, f"%config Gatecell.context_chars = {CHARS}")
        yield kc


def run(kc, code: str) -> tuple[dict, list[dict]]:
    reply, messages = execute(kc, code)
    assert reply["content"]["status"] == "ok", stream_text(messages, "stderr") + str(reply["content"])
    return reply, messages


def last_prompt(recording_gateway) -> str:
    return recording_gateway.recorder.prompts()[-1]


def test_a_dataframe_of_ten_thousand_rows_goes_as_a_bounded_markdown_table(kernel, recording_gateway):
    run(
        kernel,
        "import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Lima'] * 5000, 'temp': range(10_000)})",
    )
    run(kernel, "%%chat\nWhich city is warmer?\n{df}")
    prompt = last_prompt(recording_gateway)
    question, table = prompt.split("\n", 1)
    assert question == "Which city is warmer?"
    assert len(table) <= CHARS
    lines = table.splitlines()
    assert lines[0] == "pandas DataFrame: 10,000 rows × 2 columns"
    assert "|  | city | temp |" in lines and "|---|---|---|" in lines
    assert [line for line in lines if line.startswith("| 4 ")] == ["| 4 | Oslo | 4 |"]
    assert "| 5 " not in table and lines[-1] == "… 9,995 more rows"


def test_f_string_code_in_a_fence_passes_through_untouched(kernel, recording_gateway):
    code = 'print(f"{user!r}: {totals[\'eur\']:>8.2f}")\nlookup = {"a": {"b": 1}}'
    reply, messages = run(kernel, f"%%chat\nWhy does `{{user}}` fail in\n```python\n{code}\n```")
    assert last_prompt(recording_gateway) == f"Why does `{{user}}` fail in\n```python\n{code}\n```"
    assert "no variable" not in stream_text(messages, "stderr")


def test_fields_for_cells_outputs_and_the_last_value(kernel, recording_gateway):
    first, _ = run(kernel, "answer = 6 * 7\nanswer")
    n = first["content"]["execution_count"]
    run(kernel, "'the last value'")
    run(kernel, f"%%chat\nrepeat after me: {{Out[{n}]}} / {{_}} / {{In[{n}]}}")
    assert last_prompt(recording_gateway) == (
        "repeat after me: 42 / the last value / \n\n```python\nanswer = 6 * 7\nanswer\n```"
    )


def test_cells_sends_sources_printed_text_errors_and_values(kernel, recording_gateway):
    first, _ = run(kernel, "import time\nprint('read 3 files')\nsizes = [10, 20, 30]\nsizes")
    execute(kernel, "sizes[7]")  # fails
    reply, messages = run(kernel, "%%chat --cells 2 --show-prompt\nwhy is this slow?")
    n = first["content"]["execution_count"]
    prompt = last_prompt(recording_gateway)
    assert prompt == (
        "Notebook context: the last 2 cells run before this message.\n\n"
        f"In[{n}]:\n```python\nimport time\nprint('read 3 files')\nsizes = [10, 20, 30]\nsizes\n```\n"
        "printed to stdout:\n```text\nread 3 files\n```\n"
        f"Out[{n}]:\n[10, 20, 30]\n\n"
        f"In[{n + 1}]:\n```python\nsizes[7]\n```\nraised: IndexError: list index out of range\n\n"
        "---\n\nwhy is this slow?"
    )
    shown = displays(messages)[0]["content"]["data"]["text/plain"]
    assert prompt in shown  # --show-prompt showed exactly what was sent
    final = displays(messages)[-1]["content"]
    assert final["metadata"]["gatecell"]["prompt"] == prompt  # and provenance keeps it


def test_explain_sends_the_failing_cell_and_a_trimmed_traceback(kernel, recording_gateway):
    run(kernel, "def mean(xs):\n    return sum(xs) / len(xs)")
    failed, messages = execute(kernel, 'API_TOKEN = "tok-1234567890"\nmean([])')
    assert failed["content"]["status"] == "error"
    n = failed["content"]["execution_count"]
    reply, messages = run(kernel, "%gatecell explain")
    prompt = last_prompt(recording_gateway)
    assert prompt.startswith(
        f"The last error in this notebook, raised by cell In[{n}]:\n\n"
        '```python\nAPI_TOKEN = "…"\nmean([])\n```\n\n'
        "```text\nTraceback (most recent call last, trimmed):\n"
        f"  Cell In[{n}], line 2, in <module>\n    mean([])\n"
        f"  Cell In[{n - 1}], line 2, in mean\n    return sum(xs) / len(xs)\n"
        "ZeroDivisionError: division by zero\n```\n\n---\n\nExplain the error above"
    )
    assert "tok-1234567890" not in prompt and "ipykernel_" not in prompt  # redacted; no temp paths
    assert displays(messages)[-1]["content"]["data"]["text/plain"].startswith(
        ("You asked", "Your", "I received")
    )


def test_code_puts_a_set_next_input_payload_in_the_execute_reply(kernel):
    reply, messages = run(kernel, "%%chat --code\nwrite python to add two numbers")
    [payload] = reply["content"]["payload"]
    assert payload["source"] == "set_next_input" and payload["replace"] is False
    assert payload["text"] == (
        'def add_two_numbers():\n    """Add two numbers."""\n'
        "    raise NotImplementedError  # ask a real model for the body"
    )
    several = "Two steps:\n```python\nimport os\n```\nthen\n```bash\nls -l\n```"
    reply, _ = run(kernel, f"%%chat --code --no-interpolate\nrepeat after me: {several}")
    [payload] = reply["content"]["payload"]
    assert payload["text"] == "# [1/2] python\nimport os\n\n# [2/2] bash\nls -l"
    reply, messages = run(kernel, "%%chat --code\nhello")
    assert reply["content"]["payload"] == []
    assert stream_text(messages, "stdout") == "the reply has no code block: no cell added\n"


def test_a_panel_shares_the_conversation_of_the_cells_in_the_kernel(kernel, recording_gateway):
    run(kernel, "%gatecell reset\nfrom gatecell.notebook.widgets import ChatPanel")
    run(kernel, "%%chat\nMy name is Ada.")
    reply, messages = run(
        kernel,
        "panel = ChatPanel(conversation='default', model='local-chat')\n"
        "panel.ask('What is my name?'); panel.wait(30)\nprint(panel.messages[-1]['content'])",
    )
    assert stream_text(messages, "stdout") == "Your name is Ada.\n"
    _, _, body = recording_gateway.recorder.requests[-1]
    sent = json.loads(body)["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]  # the cell's turn went first
    assert sent[0]["content"] == "My name is Ada." and sent[1]["content"].startswith("Nice to meet you, Ada.")
    run(kernel, "%chat repeat after me: and again")
    _, _, body = recording_gateway.recorder.requests[-1]
    assert [m["content"] for m in json.loads(body)["messages"]][2:4] == [
        "What is my name?",
        "Your name is Ada.",
    ]


def test_an_async_gateway_panel_streams_while_the_kernels_loop_runs_cells(kernel, fault_server):
    fault_server.mode = "slow"  # an endless stream: a word every 20 ms
    code = f"""
import asyncio
from gatecell import AsyncGateway
agw = AsyncGateway(base_url={fault_server.base_url!r}, api_key={fault_server.key!r}, max_retries=0)
slow = ChatPanel(agw, model="fault-chat")
slow.ask("hello")
seen = []

async def watch():
    while len(set(seen)) < 4:
        await asyncio.sleep(0.005)  # the kernel's own loop, turning
        seen.append(len(slow.reply.text))

await asyncio.wait_for(watch(), 30)
print(slow.busy, slow.gateway.loop is not asyncio.get_running_loop())
slow.stop()
print(slow.busy, slow.messages[-1]["content"].startswith("word0 word1"), slow.wait(10))
"""
    reply, messages = run(kernel, code)
    assert stream_text(messages, "stdout") == "True True\nFalse True True\n"


BRACES = (
    "Check \\frac{1}{\\sqrt{2}} and e^{x} for n = {n}.\n"
    'JSON: {"user": {"id": 7, "tags": ["a", "b"]}, "ok": true}\n'
    'Code: print(f"{key}: {value:>8}") if d == {} else {**d}; {{n}} stays'
)


def test_latex_json_and_code_reach_the_gateway_byte_for_byte(kernel, recording_gateway):
    run(kernel, "x, n = 5, 42")  # x is defined: e^{x} is TeX all the same
    reply, messages = run(kernel, f"%%chat --show-prompt --footer\n{BRACES}")
    sent = BRACES.replace("= {n}.", "= 42.").replace("{{n}}", "{n}")
    assert last_prompt(recording_gateway) == sent
    shown = [m["content"]["data"]["text/plain"] for m in displays(messages)]
    assert shown[0] == "sent as written, no such variable in the notebook: {key}, {value:>8}"
    assert shown[1].endswith(f"\n\n```text\n{sent}\n```")  # --show-prompt: what went, as it went
    html = displays(messages)[1]["content"]["data"]["text/html"]
    assert f"<em>prompt sent ({len(sent)} characters; filled {{n}}):</em>" in html
    assert shown[-1].endswith("· 1 placeholder filled")
    assert displays(messages)[-1]["content"]["metadata"]["gatecell"]["placeholders"] == 1
