"""Every code example of the guide runs, so the documentation cannot drift from the code.

Each page's ``python`` and ``ipython`` blocks run in order in one real IPython shell (a
subprocess, gatecell loaded), against the embedded local gateway, in a fresh GATECELL_HOME and
working folder, with no gateway configured: what a newcomer gets on a fresh machine. A block
that cannot run offline says why in ``<!-- not-run: reason -->`` just before it; a page whose
examples are all marked so fails, and so does a fence without a language (an example must say
what it is, so none hides from this test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from blocks import RUNNABLE, Block, blocks

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs" / "guide").glob("*.md")) + [ROOT / "docs" / "index.md", ROOT / "README.md"]


def runnable(page: Path) -> list[Block]:
    return [b for b in blocks(page, ROOT) if b.lang in RUNNABLE]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_fence_names_its_language(page: Path):
    bare = [b.where for b in blocks(page, ROOT) if not b.lang]
    assert not bare, f"fences without a language (python, ipython, sh, text...): {bare}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_examples_run(page: Path, tmp_path: Path):
    examples = runnable(page)
    to_run = [b for b in examples if b.not_run is None]
    if not examples:
        pytest.skip("no Python or IPython example on this page")
    assert to_run, f"every example of {page.name} is marked not-run: run at least one"
    cells = tmp_path / "cells.json"
    cells.write_text(json.dumps([{"where": b.where, "code": b.code} for b in to_run]))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_"))}
    env.update(
        GATECELL_HOME=str(tmp_path / "home"),
        GATECELL_LOCAL_JOB_SECONDS="0.5",  # the stand-in media jobs, quicker
        MPLBACKEND="Agg",
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]),
    )
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("run_blocks.py")), str(cells)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    ran = done.stdout.count(": ok\n")
    assert ran == len(to_run), done.stdout
