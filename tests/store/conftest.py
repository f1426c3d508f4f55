"""Fixtures of the store's tests: a fresh GATECELL_HOME, a store in it, a folder others cannot write."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gatecell.store import Store


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh GATECELL_HOME for this test (and for the processes it starts)."""
    folder = tmp_path / "home"
    for name in [k for k in os.environ if k.startswith("GATECELL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GATECELL_HOME", str(folder))
    return folder


@pytest.fixture
def store(home: Path) -> Iterator[Store]:
    s = Store(home / "gatecell.db")
    yield s
    s.close()


@pytest.fixture
def locked_folder() -> Iterator[Path]:
    """A folder root owns and others may only read (outside /tmp/pytest-of-root, which is 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="gatecell-ro-"))
    folder.chmod(0o755)
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=True)
