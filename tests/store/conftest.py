"""Fixtures of the store's tests: a store in a fresh GATECELL_HOME (`home`, in tests/conftest.py),
a folder others cannot write."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gatecell.store import Store


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
