"""The whole test run keeps its data in a temporary folder, never the developer's.

Set once, before anything is collected, for tests/ and the tutorials nbval runs alike:
``GATECELL_HOME`` (the log, the local gateway's jobs, files and key), and ``XDG_DATA_HOME``
for the processes a test starts with its ``GATECELL_*`` settings cleared (a kernel, the
CLI): they fall back to the platform's data folder, which is then a temporary one too.
"""

from __future__ import annotations

import os
import shutil
import tempfile

_ROOT = tempfile.mkdtemp(prefix="gatecell-tests-")
os.environ["GATECELL_HOME"] = os.path.join(_ROOT, "home")
os.environ["XDG_DATA_HOME"] = os.path.join(_ROOT, "data")


def pytest_unconfigure(config: object) -> None:
    shutil.rmtree(_ROOT, ignore_errors=True)
