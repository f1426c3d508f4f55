"""No saved notebook holds an API key: neither the tutorials as committed nor a notebook
executed with a key configured.

The tutorials are stored with their outputs, so anything a magic, a widget or an error
printed ends up in the repository. These tests read the files as text, the way a code host
shows them, and look for keys.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SAVED = sorted(NOTEBOOKS.glob("*.ipynb"))

# SPEC 5: keys are "sk-" and a secret part. Short demo strings such as "sk-wrong" are not keys.
KEY_SHAPED = re.compile(r"sk-[A-Za-z0-9][A-Za-z0-9_\-]{15,}")
BEARER = re.compile(r"[Bb]earer\s+[A-Za-z0-9_\-.]{8,}")


def _leaks(text: str, *keys: str) -> list[str]:
    found = KEY_SHAPED.findall(text) + BEARER.findall(text)
    for key in keys:
        # The whole key, and its secret part on its own (a mask must not keep most of it).
        secret_part = key.removeprefix("sk-")
        found += [k for k in (key, secret_part) if k and k in text]
    return found


def test_there_are_tutorials():
    assert len(SAVED) >= 8, [p.name for p in SAVED]


@pytest.mark.parametrize("path", SAVED, ids=[p.name for p in SAVED])
def test_saved_notebook_holds_no_key(path: Path):
    text = path.read_text(encoding="utf-8")
    configured = [os.environ[name] for name in ("GATECELL_API_KEY", "OPENAI_API_KEY") if os.environ.get(name)]
    assert _leaks(text, *configured) == []


def _execute(path: Path, monkeypatch: pytest.MonkeyPatch, base_url: str, key: str) -> str:
    """Run a notebook in a real kernel with the key in its environment; return the saved text."""
    from nbclient import NotebookClient

    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GATECELL_BASE_URL", base_url)
    monkeypatch.setenv("GATECELL_API_KEY", key)
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=120,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
        store_widget_state=True,
    )
    client.execute()  # raises CellExecutionError if a cell fails, e.g. on a 401
    return nbformat.writes(nb)


@pytest.mark.parametrize("name", ["01-quickstart.ipynb", "06-widgets.ipynb"])
def test_executed_notebook_does_not_keep_the_configured_key(name, local_gateway, monkeypatch, tmp_path):
    # A fresh key that only this gateway accepts: every cell that reaches the gateway proves
    # the kernel held and used it.
    key = local_gateway.api_key.reveal()
    assert key.startswith("sk-")
    text = _execute(NOTEBOOKS / name, monkeypatch, local_gateway.base_url, key)
    saved = tmp_path / name
    saved.write_text(text, encoding="utf-8")
    # It ran against the configured gateway, not the embedded one, and shows its address...
    assert local_gateway.base_url in text
    assert "no gateway configured" not in text
    # ...but nowhere the key, nor its secret part.
    assert _leaks(saved.read_text(encoding="utf-8"), key) == []


def test_leak_detector_finds_a_key():
    # The detector itself can fail: a key pasted into an output is found.
    key = "sk-" + secrets.token_urlsafe(24)
    assert _leaks(f'{{"text": "key is {key}"}}', key)
    assert _leaks("Authorization: Bearer abcdefgh12345678")
    assert _leaks("sk-wrong and sk-…abcd") == []
