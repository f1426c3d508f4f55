"""The whole test run keeps its data in a temporary folder, never the developer's.

Set once, before anything is collected, for tests/ and the tutorials nbval runs alike:
``GATECELL_HOME`` (the log, the local gateway's jobs, files and key), and ``XDG_DATA_HOME``
for the processes a test starts with its ``GATECELL_*`` settings cleared (a kernel, the
CLI): they fall back to the platform's data folder, which is then a temporary one too.
Each process of the run has its own, pytest-xdist's workers too (`mkdtemp` runs in each).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

_ROOT = tempfile.mkdtemp(prefix="gatecell-tests-")
os.environ["GATECELL_HOME"] = os.path.join(_ROOT, "home")
os.environ["XDG_DATA_HOME"] = os.path.join(_ROOT, "data")


def pytest_xdist_make_scheduler(config: Any, log: Any) -> Any:
    """``--dist loadfile`` with LiteLLM's tests as one unit: a test file runs whole on one
    worker (its module-scoped servers and browser start once, a notebook's cells share their
    kernel), and tests/thirdparty, whose session fixture starts LiteLLM's proxy in each process
    that uses it, on one worker, so one proxy serves them all. (``xdist_group`` marks would
    say this per test, but xdist 3.8 applies them by rewriting ``item._nodeid``, which pytest
    9.2 no longer reads: ``--dist loadgroup`` splits files.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesAndLiteLLM(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "tests/thirdparty" if path.startswith("tests/thirdparty/") else path

    return FilesAndLiteLLM(config, log)


def pytest_unconfigure(config: object) -> None:
    shutil.rmtree(_ROOT, ignore_errors=True)
