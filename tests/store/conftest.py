"""Fixtures of the store's tests: a store in a fresh GATECELL_HOME (`home`, in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gatecell.store import Store


@pytest.fixture
def store(home: Path) -> Iterator[Store]:
    s = Store(home / "gatecell.db")
    yield s
    s.close()
