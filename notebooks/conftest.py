"""The tutorials run under nbval against the embedded gateway, whatever the shell has set.

Only the tutorials (``NN-name.ipynb``) and the dashboard are collected: a scratch notebook a
user makes in this folder is theirs, not a test.

A developer's GATECELL_BASE_URL (or OPENAI_*, or a GATECELL_MODEL default) would send the
tutorials' kernels to a real gateway and change every stored output. nbval starts a
notebook's kernel while pytest sets up its first cell, so the kernel is started here
without those variables; the test process gets them back straight after. GATECELL_HOME
becomes a folder of each tutorial's own inside the run's temporary one (the conftest.py at
the root): the kernels log there, not in the developer's data folder, and a tutorial that
reads the log (`%gatecell log --similar`) sees its own exchanges, not those of whatever
tests ran before it in the same process.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

_PREFIXES = ("GATECELL_", "OPENAI_")
_KEPT = "GATECELL_HOME"
_TUTORIAL = re.compile(r"^(\d\d-[a-z0-9-]+|dashboard)\.ipynb$")


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    if collection_path.suffix == ".ipynb" and not _TUTORIAL.match(collection_path.name):
        return True
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    cleared = [name for name in os.environ if name.startswith(_PREFIXES) and name != _KEPT]
    saved = {name: os.environ.pop(name) for name in cleared}
    home = saved[_KEPT] = os.environ[_KEPT]
    os.environ[_KEPT] = str(Path(home).with_name(f"home-{item.path.stem}"))
    try:
        yield
    finally:
        os.environ.update(saved)
