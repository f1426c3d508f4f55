"""Fixtures of the store's tests: a store in a fresh GATECELL_HOME (`home`, in tests/conftest.py),
a folder others cannot write."""

from __future__ import annotations

import os
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


NOBODY = 65534


@pytest.fixture
def locked_folder() -> Iterator[Path]:
    """A folder of the user ``nobody`` that nobody may not write: read-only, as on a read-only
    disk (outside /tmp/pytest-of-root, which is 0700). The tests run as nobody in it: a folder
    of another user is refused for another reason (tests/security/test_other_users.py)."""
    folder = Path(tempfile.mkdtemp(prefix="gatecell-ro-"))
    os.chown(folder, NOBODY, NOBODY)
    folder.chmod(0o500)
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=True)
