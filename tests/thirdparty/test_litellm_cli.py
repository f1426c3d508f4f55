"""The ``gatecell`` command against LiteLLM's proxy, as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.litellm

HINT = "Check the API key (GATECELL_API_KEY or OPENAI_API_KEY)"


def gatecell(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-m", "gatecell", *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_chat_streams_and_models_lists_modes(litellm):
    streamed = gatecell("chat", "-m", "lite-chat", "Count to 5.", env=litellm.env)
    assert (streamed.returncode, streamed.stdout, streamed.stderr) == (0, "1, 2, 3, 4, 5.\n", "")
    listed = gatecell("models", env=litellm.env)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split()[-1] for line in listed.stdout.splitlines()}
    assert rows == {
        "lite-chat": "/v1/chat/completions",
        "lite-reasoner": "/v1/responses",
        "lite-image": "/v1/images/generations",
        "lite-tts": "/v1/audio/speech",
    }


def test_a_default_model_litellm_does_not_serve_is_one_line_naming_those_it_does(litellm):
    done = gatecell("chat", "hello", env=litellm.env)  # the default model is local-chat
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        "gatecell: 400 from POST /v1/chat/completions: /chat/completions: Invalid model name"
    )
    assert line.endswith(
        "the gateway does not serve 'local-chat'; it serves lite-chat; "
        "choose one with -m MODEL or GATECELL_MODEL"
    )


def test_wrong_key_is_one_line_with_the_hint_and_without_the_key(litellm):
    wrong = "sk-wrong-" + "c" * 24
    done = gatecell("chat", "-m", "lite-chat", "hi", env={**litellm.env, "GATECELL_API_KEY": wrong})
    assert done.returncode == 1
    assert done.stderr == f"gatecell: 400 from POST /v1/chat/completions: No connected db. {HINT}\n"
    assert wrong not in done.stdout + done.stderr
