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


def _run(
    path: Path, saved: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], probe: str = ""
) -> tuple[str, str]:
    """Execute a notebook in a real kernel whose only gateway settings are `env`, then run
    `probe` in the same kernel. The notebook is saved to `saved` without the probe.

    Returns the saved file's text and what the probe printed, so that a test can check the
    kernel really held the key it was given.
    """
    from nbclient import NotebookClient

    for name in list(os.environ):
        if name.startswith(("GATECELL_", "OPENAI_")):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.cells.append(nbformat.v4.new_code_cell(probe))
    client = NotebookClient(
        nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()  # raises CellExecutionError if a cell fails, e.g. on a 401
    probed = "".join(output.get("text", "") for output in nb.cells.pop().outputs)
    nbformat.write(nb, saved)  # with the widget state, as nbconvert --execute saves it
    return saved.read_text(encoding="utf-8"), probed


@pytest.mark.parametrize("name", ["01-quickstart.ipynb", "06-widgets.ipynb"])
def test_notebook_run_with_a_configured_key_does_not_keep_it(name, local_gateway, monkeypatch, tmp_path):
    # Only this gateway accepts this key, so every cell that reaches it shows the kernel used it.
    key = local_gateway.api_key.reveal()
    env = {"GATECELL_BASE_URL": local_gateway.base_url, "GATECELL_API_KEY": key}
    text, _ = _run(NOTEBOOKS / name, tmp_path / name, monkeypatch, env)
    assert local_gateway.base_url in text  # the outputs name the configured gateway...
    assert "no gateway configured" not in text
    assert _leaks(text, key) == []  # ...and nowhere its key


def test_notebook_run_on_the_embedded_gateway_does_not_keep_its_key(monkeypatch, tmp_path):
    # The embedded gateway takes its key from GATECELL_LOCAL_KEYS when set: a known one here.
    key = "sk-local-" + secrets.token_urlsafe(24)
    probe = (
        "import os; from gatecell.local import embedded; "
        "print(embedded.start().api_key.reveal() == os.environ['GATECELL_LOCAL_KEYS'])"
    )
    name = "01-quickstart.ipynb"
    text, probed = _run(NOTEBOOKS / name, tmp_path / name, monkeypatch, {"GATECELL_LOCAL_KEYS": key}, probe)
    assert probed.strip() == "True"  # the magics ran on the embedded gateway holding this key
    assert "no gateway configured" in text
    assert _leaks(text, key) == []


def test_leak_detector_finds_a_key():
    # The detector itself can fail: a key pasted into an output is found.
    key = "sk-" + secrets.token_urlsafe(24)
    assert _leaks(f'{{"text": "key is {key}"}}', key)
    assert _leaks(f"masked badly: {key[3:]}", key)
    assert _leaks("Authorization: Bearer abcdefgh12345678")
    assert _leaks("sk-wrong and sk-…abcd") == []
