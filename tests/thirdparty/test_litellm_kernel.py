"""The magics in a real Jupyter kernel pointed at LiteLLM's proxy, as a notebook shows them."""

from __future__ import annotations

import os
import re

import pytest

pytestmark = pytest.mark.litellm

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@pytest.fixture(scope="module")
def shown(litellm, kernel_cells, tmp_path_factory):
    """One kernel, configured only through the environment, running a short notebook."""
    from jupyter_client import KernelManager

    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_"))}
    km = KernelManager(kernel_name="python3")
    km.start_kernel(
        env={**env, **litellm.env, "GATECELL_OUTPUT": "rich"}, cwd=str(tmp_path_factory.mktemp("k"))
    )
    cells = {
        "load": "%load_ext gatecell",
        "unserved": "%%chat\nhello",  # the default model, local-chat, is not served there
        "unserved again": "%chat hello",
        "config model": "%config Gatecell.model = 'lite-chat'",
        "chat": "%%chat --footer\nWhat is 2+2?",
        "messages": "%%chat --api messages --no-stream\nWhat is 2+2?",
        "generate": "%%chat --api generate-content\nWhat is 2+2?",
        "reason": "%%reason -m lite-reasoner --effort low\nWhat is 2+2?",
        "image": "%%image -m lite-image --size 256x256\na lighthouse",
        "speak": "%%speak -m lite-tts\nHello from LiteLLM",
        "models": "%gatecell models",
        "config": "%gatecell config",
        "help": "%%chat --help",
    }
    try:
        return dict(zip(cells, kernel_cells(km.connection_file, *cells.values()), strict=True))
    finally:
        km.shutdown_kernel(now=True)


def test_a_default_model_litellm_does_not_serve_is_one_line_naming_those_it_does(shown):
    for name in ("unserved", "unserved again"):
        cell = shown[name]
        assert not cell["ok"] and cell["stdout"] == ""
        (line,) = cell["stderr"].splitlines()
        assert line.startswith(
            "gatecell: 400 from POST /v1/chat/completions: /chat/completions: Invalid model name"
        )
        assert re.search(rf"\(request id {UUID}\)", line)  # x-litellm-call-id, in the error
        assert line.endswith(
            "the gateway does not serve 'local-chat'; it serves lite-chat; "
            "set the default with %config Gatecell.model = '...' or GATECELL_MODEL"
        )
    assert "no gateway configured" not in shown["unserved"]["stderr"]  # LiteLLM is configured


def test_chat_in_every_format_with_the_request_id_in_footer_and_provenance(shown):
    chat = shown["chat"]
    assert chat["ok"] and chat["stderr"] == ""
    assert chat["text"].startswith("2+2 = 4")
    footer = re.search(rf"lite-chat · /v1/chat/completions · .* · request ({UUID})", chat["text"])
    assert footer, chat["text"]
    assert chat["displays"][-1]["metadata"]["gatecell"]["request_id"] == footer.group(1)
    for name, endpoint in (
        ("messages", "/v1/messages"),
        ("generate", "/v1beta/models/lite-chat:streamGenerateContent?alt=sse"),
    ):
        cell = shown[name]
        assert cell["ok"] and cell["text"].startswith("2+2 = 4"), cell
        prov = cell["displays"][-1]["metadata"]["gatecell"]
        assert prov["endpoint"] == endpoint and re.fullmatch(UUID, prov["request_id"])


def test_reason_image_and_speech(shown):
    reason = shown["reason"]
    assert reason["ok"] and "2+2 = 4" in reason["text"] and "Effort low" in reason["text"]
    assert reason["displays"][-1]["metadata"]["gatecell"]["endpoint"] == "/v1/responses"
    for name, kind in (("image", "image/png"), ("speak", "audio/wav")):
        cell = shown[name]
        assert cell["ok"], cell
        prov = [d["metadata"].get("gatecell", {}) for d in cell["displays"]]
        assert any(re.fullmatch(UUID, p.get("request_id", "")) for p in prov), prov
        assert any(kind in str(d["data"]) for d in cell["displays"]), (name, cell["displays"])


def test_models_table_config_and_help(shown, litellm):
    table = shown["models"]["text"]
    for row in (
        ("lite-chat", "openai", "/v1/chat/completions"),
        ("lite-reasoner", "openai", "/v1/responses"),
        ("lite-image", "openai", "/v1/images/generations"),
        ("lite-tts", "openai", "/v1/audio/speech"),
    ):
        assert list(row) in [line.split() for line in table.splitlines()], table
    config = shown["config"]["text"]
    assert f"'{litellm.base_url}'" in config and "set (environment)" in config
    assert litellm.key not in str(shown)
    assert shown["help"]["ok"] and shown["help"]["stdout"].startswith("usage: %%chat")
