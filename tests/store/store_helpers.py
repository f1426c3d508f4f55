"""Helpers of the store's tests: request bodies, child processes, the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

CLI = [sys.executable, "-m", "gatecell"]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment less every GATECELL_/OPENAI_ setting of the machine, plus ``extra``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_"))}
    return {**base, "PYTHONDONTWRITEBYTECODE": "1", **extra}


def chat_body(prompt: str, *, model: str = "gpt-test", stream: bool = False, **params: Any) -> bytes:
    """A chat request body as the client sends it: JSON bytes."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "stream": stream, **params}
    return json.dumps(body).encode()


def run_child(script: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter of this venv."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_cli(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``gatecell ARGS`` as a user runs it, on the log in ``home``."""
    return subprocess.run(
        [*CLI, *args],
        env=clean_env(GATECELL_HOME=str(home), **env),
        capture_output=True,
        text=True,
        timeout=120,
    )
